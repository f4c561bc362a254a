package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/hosttest"
)

// TestSandboxed runs the built plugin under the host with the sandbox on
// (as root, like CI), as the unprivileged user the manifest override
// names: it drains the ring that user may write, refuses the one it may
// not with reason open, and expires the agent no process maps while the
// one a process (of that user) maps stays: the liveness check works from
// inside the plugin's PID namespace and Landlock domain.
func TestSandboxed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("builds the host and the plugin")
	}
	const nobody = 65534
	root := hosttest.TrustedDir(t, "plexporter-nixl-sandbox", "plugins", "telemetry")
	plugins, telemetry := filepath.Join(root, "plugins"), filepath.Join(root, "telemetry")
	hosttest.Build(t,
		hosttest.Binary{Pkg: "../../host", Out: filepath.Join(root, "plexporter")},
		hosttest.Binary{Pkg: ".", Out: filepath.Join(plugins, "plexporter-nixl")})
	hosttest.InstallManifest(t, plugins, "plexporter-nixl.yaml", "")

	// Rings as NIXL leaves them: 0644, owned by the application.
	ring := func(name string, uid int, events ...event) {
		w := newRingWriter(t, filepath.Join(telemetry, name), layoutV4, 64)
		for _, e := range events {
			w.write(e)
		}
		w.close()
		if err := os.Chown(filepath.Join(telemetry, name), uid, nobody); err != nil {
			t.Fatal(err)
		}
	}
	ring("live", nobody, event{evTxBytes, 4096}, event{evTxRequests, 1})
	ring("dead", nobody, event{evRxBytes, 512})
	ring("roots", 0, event{evTxBytes, 1})

	// The agent of "live": a process of the application's user mapping it
	// (this test binary, copied where that user may run it).
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	agentBin := filepath.Join(root, "agent.test")
	if err := os.WriteFile(agentBin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(agentBin, "-test.run=^TestHelperAgent$")
	agent.Dir = root
	agent.Env = append(os.Environ(), "NIXL_TEST_AGENT_RING="+filepath.Join(telemetry, "live"))
	agent.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdin, _ := agent.StdinPipe()
	stdout, _ := agent.StdoutPipe()
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Wait()
	defer stdin.Close()
	if _, err := stdout.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the agent did not map its ring: %v", err)
	}

	// Long enough that the idle agent is still there at the first scrape
	// however slowly a loaded machine starts the host.
	const staleAfter = 20 * time.Second
	host := hosttest.Start(t, hosttest.Options{
		Ready:     60 * time.Second,
		Binary:    filepath.Join(root, "plexporter"),
		PluginDir: plugins,
		Config: fmt.Sprintf(`plugins:
  nixl:
    config:
      telemetry_dirs: [%q]
      drain_interval: 10ms
      rescan_interval: 100ms
      stale_after: %s
    manifest:
      user: nobody
      paths:
        read_write: [%q]
`, telemetry, staleAfter, telemetry),
		Args: []string{"--plugin.sandbox"},
	})
	scrape := func() map[string]float64 {
		t.Helper()
		status, body, err := host.Fetch("/metrics")
		if err != nil || status != http.StatusOK {
			return nil
		}
		return samples(t, strings.NewReader(body), "hostname", "instance")
	}
	var (
		got     map[string]float64
		started = time.Now()
	)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if got = scrape(); got[`plexporter_plugin_up{plugin="nixl"}`] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin is not up after 60s: %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantValues(t, got, map[string]float64{
		`plexporter_plugin_sandboxed{plugin="nixl"}`:                 1,
		`agent_tx_bytes_total{agent_name="live"}`:                    4096,
		`agent_rx_bytes_total{agent_name="dead"}`:                    512,
		`nixl_reader_errors_total{agent_name="roots",reason="open"}`: 1,
		`nixl_reader_errors_total{agent_name="live",reason="open"}`:  0,
	})
	if _, ok := got[`agent_tx_bytes_total{agent_name="roots"}`]; ok {
		t.Error("a ring the plugin may not write was read")
	}
	// The idle agent is expired stale_after after the plugin first saw
	// it; waited for, not slept on.
	for deadline := time.Now().Add(staleAfter + 60*time.Second); ; time.Sleep(200 * time.Millisecond) {
		if got = scrape(); got[`nixl_agents_expired_total{}`] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle agent was not expired %s after the plugin started: %v", time.Since(started), got)
		}
	}
	wantValues(t, got, map[string]float64{
		`nixl_agents_expired_total{}`:             1,
		`nixl_agents{}`:                           1,
		`agent_tx_bytes_total{agent_name="live"}`: 4096,
	})
	if _, ok := got[`agent_rx_bytes_total{agent_name="dead"}`]; ok {
		t.Error("the unmapped, idle agent was not expired")
	}
}

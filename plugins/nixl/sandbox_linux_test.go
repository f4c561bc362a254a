package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/syncbuf"
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
	root, err := os.MkdirTemp("", "plexporter-nixl-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	plugins, telemetry := filepath.Join(root, "plugins"), filepath.Join(root, "telemetry")
	for _, d := range []string{root, plugins, telemetry} {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755) // the plugin's user walks it; only root writes it
	}
	build(t, filepath.Join(root, "plexporter"), "../../host")
	build(t, filepath.Join(plugins, "plexporter-nixl"), ".")
	manifest, err := os.ReadFile("plexporter-nixl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "plexporter-nixl.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}

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

	cfg := filepath.Join(root, "plexporter.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`plugins:
  nixl:
    config:
      telemetry_dirs: [%q]
      drain_interval: 10ms
      rescan_interval: 100ms
      stale_after: 1s
    manifest:
      user: nobody
      paths:
        read_write: [%q]
`, telemetry, telemetry)), 0o644)
	addr := freeAddr(t)
	logs := &syncbuf.Buffer{}
	host := exec.Command(filepath.Join(root, "plexporter"), "--plugin.dir="+plugins, "--config.file="+cfg,
		"--plugin.sandbox", "--web.listen-address="+addr)
	host.Stdout, host.Stderr = logs, logs
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		host.Process.Signal(syscall.SIGTERM)
		host.Wait()
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil
		}
		body, _ := io.ReadAll(resp.Body)
		return samples(t, strings.NewReader(string(body)), "hostname", "instance")
	}
	var got map[string]float64
	for deadline := time.Now().Add(30 * time.Second); ; {
		if got = scrape(); got[`plexporter_plugin_up{plugin="nixl"}`] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin is not up after 30s: %v", got)
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
	time.Sleep(1500 * time.Millisecond) // past stale_after
	got = scrape()
	wantValues(t, got, map[string]float64{
		`nixl_agents_expired_total{}`:             1,
		`nixl_agents{}`:                           1,
		`agent_tx_bytes_total{agent_name="live"}`: 4096,
	})
	if _, ok := got[`agent_rx_bytes_total{agent_name="dead"}`]; ok {
		t.Error("the unmapped, idle agent was not expired")
	}
}

func build(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

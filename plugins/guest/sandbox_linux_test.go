package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/syncbuf"
)

// TestInHostSandbox runs the plugin as the host runs it, as root: in the
// sandbox of its own manifest, over this machine's /proc, /sys and
// /dev/kmsg, with an HTTPS and an ICMP probe and the operator's manifest
// overrides README.md documents (CAP_SYSLOG for the kernel log,
// network.inet.tcp_connect to the endpoint's port). It checks that every
// source is read without an error (kmsg included: this machine has
// dmesg_restrict=1), that
// the granted port is reachable and the system's CA certificates readable
// (the probe's TLS handshake fails on the test certificate, which no system
// root signed, so success is 0, but the probe was made), and that the
// ICMP probe is refused by the host's seccomp filter, as README.md says:
// no series, a counted probe failure.
func TestInHostSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	https := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer https.Close()
	_, port, _ := net.SplitHostPort(https.Listener.Addr().String())

	// The sandbox's trust rules: a root-owned directory nobody else may
	// write, walkable by the plugin's user.
	dir, err := os.MkdirTemp("", "plexporter-guest-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	plugins := filepath.Join(dir, "plugins")
	for _, d := range []string{dir, plugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	build(t, filepath.Join(dir, "plexporter"), "./host")
	build(t, filepath.Join(plugins, "plexporter-guest"), "./plugins/guest")
	manifest, err := os.ReadFile("plexporter-guest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "plexporter-guest.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "plexporter.yml")
	config := fmt.Sprintf(`plugins:
  guest:
    config:
      https_endpoints: ["%s/"]
      icmp_targets: [127.0.0.1]
      probe_interval: 10s
      probe_timeout: 2s
    manifest:
      capabilities: [CAP_SYSLOG]
      network:
        inet:
          tcp_connect: [%s]
`, https.URL, port)
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(filepath.Join(dir, "plexporter"), "--plugin.dir="+plugins, "--config.file="+cfg,
		"--path.sysfs=/sys", "--path.procfs=/proc", "--web.listen-address="+addr,
		// A grant that connects is refused below Landlock ABI 9 without it
		// (README.md, Health probes); this machine's kernel may be older.
		"--plugin.allow-any-unix-connect")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})

	var text string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		text = get(addr)
		if strings.Contains(text, `probe_success{probe="https"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe result after 30s:\n%s", text)
		}
	}
	mustContain(t, text,
		`plexporter_plugin_sandboxed{plugin="guest"} 1`,
		`plexporter_plugin_up{plugin="guest"} 1`,
		"kernel_soft_lockups_total 0",
		fmt.Sprintf(`probe_success{probe="https",target="%s/"} 0`, https.URL),
		`guest_collection_errors_total{collector="probe"} 1`)
	for _, c := range []string{collectorStat, collectorPressureCPU, collectorPressureIO, collectorPressureMemory,
		collectorMeminfo, collectorDiskstats, collectorFilesystem, collectorKmsg} {
		mustContain(t, text, fmt.Sprintf(`guest_collection_errors_total{collector=%q} 0`, c))
	}
	for _, family := range []string{"cpu_steal_seconds_total ", "psi_io_ratio{", "mem_available_bytes ", "diskstats_reads_completed_total{", "disk_size_bytes{"} {
		if !strings.Contains(text, "\n"+family) {
			t.Errorf("no %s in the sandbox", strings.TrimSpace(family))
		}
	}
	if strings.Contains(text, `probe="icmp"`) {
		t.Error("an ICMP probe result in the sandbox, whose seccomp filter refuses ICMP sockets: update README.md")
	}
	if !strings.Contains(logs.String(), "no ICMP socket") {
		t.Error("the host log does not say why the ICMP probe was not made")
	}
}

func get(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// build compiles pkg of this module statically, as the Makefile does.
func build(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Join("..", "..")
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

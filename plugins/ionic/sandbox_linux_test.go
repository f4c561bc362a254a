package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/syncbuf"
)

// TestSandboxedLiveness runs the host and the plugin as shipped (its
// manifest, the sandbox: own PID namespace, Landlock, the plexporter or
// nobody user) over a run directory under --path.rootfs that lists a live
// process and a dead one. In the plugin's PID namespace kill(pid, 0) would
// say ESRCH for both; the procfs check tells them apart and reads the live
// one's start time.
func TestSandboxedLiveness(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("builds the host and the plugin")
	}
	dir, err := os.MkdirTemp("", "plexporter-ionic") // walkable by the plugin's user, owned by root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pluginDir, runDir := filepath.Join(dir, "plugins"), filepath.Join(dir, "node", "run", "rocm-ernic")
	for _, d := range []string{dir, pluginDir, filepath.Join(dir, "node"), filepath.Join(dir, "node", "run"), runDir} {
		os.MkdirAll(d, 0o755)
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build(t, filepath.Join(dir, "plexporter"), "../../host")
	build(t, filepath.Join(pluginDir, "plexporter-ionic"), ".")
	manifest, err := os.ReadFile("plexporter-ionic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(pluginDir, "plexporter-ionic.yaml"), manifest)

	server := exec.Command("sleep", "300") // stands in for a rocm-ernic server
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(runDir, manifestFile), []byte(fmt.Sprintf(`{"instances": [
	  {"id": 1, "role": "manager", "pid": %d, "mac": "02:00:00:00:00:01", "vm": null},
	  {"id": 2, "role": "worker", "pid": %d, "mac": "02:00:00:00:00:02", "vm": null}]}`, server.Process.Pid, gone.Process.Pid)))
	writeFile(t, filepath.Join(runDir, "1.stats"), renderStats(10, true))
	cfg := filepath.Join(dir, "plexporter.yml")
	writeFile(t, cfg, []byte("plugins:\n  ionic: {}\n"))

	addr := freeAddr(t)
	logs := &syncbuf.Buffer{}
	host := exec.Command(filepath.Join(dir, "plexporter"), "--plugin.dir="+pluginDir, "--config.file="+cfg,
		"--path.rootfs="+filepath.Join(dir, "node"), "--web.listen-address="+addr)
	host.Env = append(os.Environ(), "ERNIC_RUN_DIR=") // the test's environment must not move the run directory
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
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no ionic series after 30 s; last scrape:\n%s", body)
		}
		body = get(addr)
		if strings.Contains(body, "ernic_instances ") {
			break
		}
	}
	body = get(addr)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[sampleKey(name, m.GetLabel())] = sampleValue(m)
		}
	}
	for key, want := range map[string]float64{
		`plexporter_plugin_sandboxed{plugin="ionic"}`:                            1,
		`ernic_instance_up{ernic_id="1",mac="02:00:00:00:00:01",role="manager"}`: 1,
		`ernic_instance_up{ernic_id="2",mac="02:00:00:00:00:02",role="worker"}`:  0,
		`ernic_stats_writes_total{ernic_id="1",role="manager"}`:                  10,
		`ionic_collection_errors_total{collector="procfs"}`:                      0,
		`ionic_collection_errors_total{collector="stats"}`:                       0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if up, ok := got[`ernic_instance_uptime_seconds{ernic_id="1",role="manager"}`]; !ok || up < 0 || up > 120 {
		t.Errorf("uptime of the live server: %v (present %v): its stat file was not read in the sandbox", up, ok)
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", body)
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

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
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

func get(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

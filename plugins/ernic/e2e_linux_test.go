package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/dashboardtest"
	"github.com/plexporter/plexporter/internal/testkit/hosttest"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// node is a host and the plugin as shipped (its manifest; in the sandbox
// when the test runs as root: own PID namespace, Landlock, the plexporter
// or nobody user) over a run directory under --path.rootfs.
type node struct {
	host   *hosttest.Host
	runDir string
}

// startNode builds the host and the plugin, writes the manifest (instances
// listed by pid) and the statistics files into <rootfs>/run/rocm-ernic,
// and starts the host. The node's real procfs is the plugin's.
func startNode(t *testing.T, manifest string, stats map[string][]byte) *node {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the host and the plugin")
	}
	dir := hosttest.TrustedDir(t, "plexporter-ernic", "plugins", filepath.Join("node", "run", "rocm-ernic"))
	pluginDir, runDir := filepath.Join(dir, "plugins"), filepath.Join(dir, "node", "run", "rocm-ernic")
	hosttest.Build(t,
		hosttest.Binary{Pkg: "../../host", Out: filepath.Join(dir, "plexporter")},
		hosttest.Binary{Pkg: ".", Out: filepath.Join(pluginDir, "plexporter-ernic")})
	hosttest.InstallManifest(t, pluginDir, "plexporter-ernic.yaml", "")
	hosttest.WriteFile(t, filepath.Join(runDir, manifestFile), []byte(manifest))
	for id, data := range stats {
		hosttest.WriteFile(t, filepath.Join(runDir, id+".stats"), data)
	}
	n := &node{runDir: runDir, host: hosttest.Start(t, hosttest.Options{
		Binary:               filepath.Join(dir, "plexporter"),
		PluginDir:            pluginDir,
		Config:               "plugins:\n  ernic: {}\n",
		Args:                 []string{"--path.rootfs=" + filepath.Join(dir, "node")},
		Env:                  []string{"ERNIC_RUN_DIR="}, // the test's environment must not move the run directory
		UnconfinedUnlessRoot: true,
		Ready:                60 * time.Second,
	})}
	var body string
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(body, "ernic_instances "); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no ernic series after 60 s; last scrape:\n%s", body)
		}
		body = n.host.Metrics()
	}
	return n
}

// startServer starts a process that stands in for a rocm-ernic server and
// returns its pid.
func startServer(t *testing.T) int {
	t.Helper()
	server := exec.Command("sleep", "300")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	return server.Process.Pid
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	return gone.Process.Pid
}

// TestSandboxedLiveness: in the plugin's PID namespace kill(pid, 0) would
// say ESRCH for a live server and a dead one alike; the procfs check tells
// them apart and reads the live one's start time.
func TestSandboxedLiveness(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	n := startNode(t, fmt.Sprintf(`{"instances": [
	  {"id": 1, "role": "manager", "pid": %d, "mac": "02:00:00:00:00:01", "vm": null},
	  {"id": 2, "role": "worker", "pid": %d, "mac": "02:00:00:00:00:02", "vm": null}]}`, startServer(t), deadPid(t)),
		map[string][]byte{"1": renderStats(10, true)})
	mfs, body := n.host.Scrape(t)
	got := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[sampleKey(name, m.GetLabel())] = sampleValue(m)
		}
	}
	for key, want := range map[string]float64{
		`plexporter_plugin_sandboxed{plugin="ernic"}`:                            1,
		`ernic_instance_up{ernic_id="1",mac="02:00:00:00:00:01",role="manager"}`: 1,
		`ernic_instance_up{ernic_id="2",mac="02:00:00:00:00:02",role="worker"}`:  0,
		`ernic_stats_writes_total{ernic_id="1",role="manager"}`:                  10,
		`ernic_collection_errors_total{collector="procfs"}`:                      0,
		`ernic_collection_errors_total{collector="stats"}`:                       0,
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

// TestDashboardAnswers: every panel and variable query of the dashboard,
// against a real Prometheus that scraped the plugin over the shared run
// directory (instances 1 and 2 live, 3 dead): no error, no empty result.
func TestDashboardAnswers(t *testing.T) {
	prom := sdktest.PrometheusBinary(t, "prometheus")
	root := sdktest.Unpack(t, "testdata/ernic-run.ttar")
	runDir := filepath.Join(root, "run", "rocm-ernic")
	manifest, err := os.ReadFile(filepath.Join(runDir, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.NewReplacer(`"pid": 2101`, fmt.Sprintf(`"pid": %d`, startServer(t)), `"pid": 2102`, fmt.Sprintf(`"pid": %d`, startServer(t))).Replace(string(manifest))
	stats := map[string][]byte{}
	for _, id := range []string{"1", "2", "3"} {
		if stats[id], err = os.ReadFile(filepath.Join(runDir, id+".stats")); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, m, stats)
	promURL := dashboardtest.StartPrometheus(t, prom, n.host.Addr)
	hosttest.WaitFor(t, 60*time.Second, "five scrapes", func() bool {
		r, err := dashboardtest.Instant(promURL, `count_over_time(up{job="plexporter"}[1m]) >= 5`)
		return err == nil && len(r) == 1
	})
	dashboardtest.CheckAnswers(t, promURL, dashboardFile, dashboardtest.Load(t, dashboardFile))
}

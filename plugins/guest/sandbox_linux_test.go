package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/hosttest"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestInHostSandbox runs the plugin as the host runs it, as root: in the
// sandbox of its own manifest, over this machine's /proc, /sys and
// /dev/kmsg.
//
// With the shipped manifest as it is, every source is read without an
// error, and under dmesg_restrict=1 the refused kernel log is counted and
// logged with what to grant, but is not a partial error.
//
// With the operator's override README.md documents (CAP_SYSLOG for the
// kernel log): the kernel log is read. (The active probes, and the network
// they need, are the probe plugin's: plugins/probe/sandbox_linux_test.go.)
func TestInHostSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	dir := sandboxDir(t)
	procfsCollectors := []string{collectorStat, collectorPressureCPU, collectorPressureIO, collectorPressureMemory,
		collectorMeminfo, collectorDiskstats, collectorFilesystem}
	families := []string{"cpu_steal_seconds_total ", "psi_io_ratio{", "mem_available_bytes ", "diskstats_reads_completed_total{", "disk_size_bytes{"}
	checkSources := func(t *testing.T, text string) {
		t.Helper()
		mustContain(t, text, `plexporter_plugin_sandboxed{plugin="guest"} 1`, `plexporter_plugin_up{plugin="guest"} 1`)
		for _, c := range procfsCollectors {
			mustContain(t, text, fmt.Sprintf(`guest_collection_errors_total{collector=%q} 0`, c))
		}
		for _, family := range families {
			if !strings.Contains(text, "\n"+family) {
				t.Errorf("no %s in the sandbox", strings.TrimSpace(family))
			}
		}
	}

	t.Run("shipped manifest", func(t *testing.T) {
		text, logs := runHost(t, dir, "plugins:\n  guest: {}\n", func(text string) bool {
			return strings.Contains(text, `plexporter_plugin_scrape_success{plugin="guest"} 1`)
		})
		checkSources(t, text)
		sdkErrors := `plexporter_plugin_collect_errors_total{collector="kmsg",plugin="guest"}`
		if strings.Contains(text, sdkErrors) {
			t.Errorf("a refused or opened kernel log is a partial error:\n%s", text)
		}
		restricted, _ := os.ReadFile("/proc/sys/kernel/dmesg_restrict")
		if strings.TrimSpace(string(restricted)) != "1" {
			mustContain(t, text, "kernel_soft_lockups_total 0", `guest_collection_errors_total{collector="kmsg"} 0`)
			return
		}
		mustContain(t, text, `guest_collection_errors_total{collector="kmsg"} 1`)
		sdktest.Lacks(t, text, "kernel_soft_lockups_total")
		if !strings.Contains(logs(), "needs CAP_SYSLOG when kernel.dmesg_restrict is 1") {
			t.Error("the host log does not say what reading the kernel log needs")
		}
	})

	t.Run("operator overrides", func(t *testing.T) {
		config := `plugins:
  guest:
    allow_capabilities: [CAP_SYSLOG]
    manifest:
      capabilities: [CAP_SYSLOG]
`
		text, _ := runHost(t, dir, config, func(text string) bool {
			return strings.Contains(text, `plexporter_plugin_scrape_success{plugin="guest"} 1`)
		})
		checkSources(t, text)
		mustContain(t, text,
			"kernel_soft_lockups_total 0",
			`guest_collection_errors_total{collector="kmsg"} 0`)
	})
}

// sandboxDir builds the host and the plugin into a directory the sandbox's
// trust rules accept, with the shipped manifest.
func sandboxDir(t *testing.T) string {
	dir := hosttest.TrustedDir(t, "plexporter-guest-sandbox", "plugins")
	hosttest.Build(t,
		hosttest.Binary{Pkg: "./host", Dir: "../..", Out: filepath.Join(dir, "plexporter")},
		hosttest.Binary{Pkg: "./plugins/guest", Dir: "../..", Out: filepath.Join(dir, "plugins", "plexporter-guest")})
	hosttest.InstallManifest(t, filepath.Join(dir, "plugins"), "plexporter-guest.yaml", "")
	return dir
}

// runHost starts the host of dir with config over this machine's trees,
// scrapes it until ready says the exposition has what the test waits for
// (60 s at most), stops it and returns that exposition and the host's log.
func runHost(t *testing.T, dir, config string, ready func(string) bool) (string, func() string) {
	t.Helper()
	h := hosttest.Start(t, hosttest.Options{
		Ready:     60 * time.Second,
		Binary:    filepath.Join(dir, "plexporter"),
		PluginDir: filepath.Join(dir, "plugins"),
		Config:    config,
		Args:      []string{"--path.sysfs=/sys", "--path.procfs=/proc"},
	})
	defer h.Stop()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		text := h.Metrics()
		if ready(text) {
			return text, h.Logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 60s:\n%s", text)
		}
	}
}

package main

// Resource-limit tests: hostile probe plugins (a fork bomb, a shared-memory
// filler, a spinner) through the real host, each limit enforced by the
// plugin's cgroup (cgroup v2, or v1 on a hybrid host). The limit-off
// controls run the same plugin without the sandbox.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// limitsManifest is a probe manifest with the given limits and sleep(1)
// readable and executable (the fork bomb's children).
func limitsManifest(limits string) string {
	return fmt.Sprintf("user: nobody\ngroup: nogroup\npaths:\n  read_only: [/usr/bin/sleep, /proc/self/status]\nlimits: %s\n", limits)
}

func TestSandboxCgroupPidsLimit(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "forker", limitsManifest("{memory: 96MiB, pids: 16}"))
	cfg := "  forker: {config: {forks: 2000, fork_bin: /usr/bin/sleep}}\n"

	on := startSandboxHost(t, st, cfg)
	// A Collect slower than the scrape's deadline goes on; a later scrape
	// joins it and gets its answer.
	got := -1.0
	on.waitFor(120*time.Second, "the forker's answer", func() bool {
		_, mfs := on.scrape("")
		got = value(mfs, "probe_forked")
		return got >= 0
	})
	if got > 16 {
		t.Errorf("under limits.pids 16 the plugin started %v children, want at most 16", got)
	}
	if strings.Contains(on.logs.String(), "not enforced") {
		t.Errorf("a limits warning where the limits are enforced:\n%s", on.logs.String())
	}

	// 100, not 2000, and a collect timeout of a minute: unconfined, forks
	// on a loaded machine can outlast three 5 s scrape deadlines in a row,
	// and the host restarts a plugin for that.
	off := startSandboxHost(t, st, "  forker: {timeout: 60s, config: {forks: 100, fork_bin: /usr/bin/sleep}}\n", "--no-plugin.sandbox")
	off.waitFor(120*time.Second, "100 children started without the sandbox", func() bool {
		_, mfs := off.scrape("")
		return value(mfs, "probe_forked") == 100
	})
}

func TestSandboxCgroupSharedMemoryOOMKill(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "shm", limitsManifest("{memory: 64MiB}"))
	st.install(t, "probe", st.probeManifest(""))
	cfg := fmt.Sprintf("  shm: {config: {shm_mib: 2048}}\n  probe: %s\n", st.probeConfig(0))

	h := startSandboxHost(t, st, cfg)
	_, mfs := h.scrape("")
	if got := value(mfs, "probe_shared_bytes"); got > 64<<20 {
		t.Fatalf("the plugin filled %v bytes of shared memory under limits.memory 64MiB", got)
	}
	if value(mfs, "plexporter_plugin_scrape_success", "plugin", "probe") != 1 || value(mfs, "probe_allowed", "action", "read_granted") != 1 {
		t.Fatal("the other plugin was affected")
	}
	h.waitFor(60*time.Second, "the OOM kill counted and the plugin restarted", func() bool {
		_, mfs := h.scrape("?collect[]=probe")
		return value(mfs, "plexporter_plugin_oom_kills_total", "plugin", "shm") >= 1 &&
			value(mfs, "plexporter_plugin_restarts_total", "plugin", "shm") >= 1
	})
	if !strings.Contains(h.logs.String(), "OOM killer") {
		t.Errorf("the restart does not say the OOM killer killed it:\n%s", h.logs.String())
	}

	// 256 MiB, four times the limit, not 2 GiB, and a collect timeout of a
	// minute: unconfined, the page faults on a loaded machine (load 15)
	// outlasted three 5 s deadlines in a row, and the host restarts a
	// plugin for that, which starts the filling over.
	off := startSandboxHost(t, st, "  shm: {timeout: 60s, config: {shm_mib: 256}}\n", "--no-plugin.sandbox")
	off.waitFor(120*time.Second, "256 MiB of shared memory filled without the sandbox", func() bool {
		_, mfs := off.scrape("")
		return value(mfs, "probe_shared_bytes") == 256<<20
	})
}

func TestSandboxCgroupCPUQuota(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "spinner", limitsManifest("{memory: 96MiB, cpu: 0.2}"))
	h := startSandboxHost(t, st, "  spinner: {config: {spin: 4}}\n")
	cpu := func() (float64, float64) {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_plugin_cpu_seconds_total", "plugin", "spinner"),
			value(mfs, "plexporter_plugin_cpu_throttled_seconds_total", "plugin", "spinner")
	}
	start := time.Now()
	cpu0, thr0 := cpu()
	if cpu0 < 0 || thr0 < 0 {
		t.Fatal("no cgroup CPU metrics for the spinner")
	}
	time.Sleep(20 * time.Second)
	cpu1, thr1 := cpu()
	window := time.Since(start).Seconds() // contains both readings
	used := cpu1 - cpu0
	t.Logf("spinner used %.2f CPU-seconds in %.1f s (%.3f CPU), throttled %.1f s", used, window, used/window, thr1-thr0)
	if used > 0.25*window {
		t.Errorf("under limits.cpu 0.2 the spinner used %.2f CPU-seconds in %.1f s", used, window)
	}
	if thr1 <= thr0 {
		t.Errorf("the spinner was never throttled")
	}
}

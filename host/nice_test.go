package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Plugins run in a lower CPU weight class than the host (issue 28): every
// process the host starts for a plugin, sandboxed or not, runs at
// launch.PluginNice (10: weight 110 against the host's 1024), inherited
// from the one thread that forks them, while the host stays at its own
// nice value. Without it the plugins ran at the host's nice 0 and a
// flooding plugin's CPU weighed as much as the host's scrape path (the
// test fails: nice 0).
func TestPluginsRunBelowTheHost(t *testing.T) {
	check := func(t *testing.T, h *host, plugins int) {
		t.Helper()
		_, mfs := h.scrape("")
		if v := value(mfs, "plexporter_plugin_up", "plugin", "alpha"); v != 1 {
			t.Fatalf("alpha not up: %v", v)
		}
		if n := nice(t, h.cmd.Process.Pid); n != 0 {
			t.Errorf("the host runs at nice %d, want its own 0", n)
		}
		procs := descendants(h.cmd.Process.Pid)
		if len(procs) < plugins {
			t.Fatalf("%d processes below the host, want at least %d", len(procs), plugins)
		}
		for _, pid := range procs {
			tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			for _, tk := range tasks {
				tid, _ := strconv.Atoi(tk.Name())
				if n := nice(t, tid); n != 10 {
					t.Errorf("plugin process %d thread %d runs at nice %d, want 10", pid, tid, n)
				}
			}
		}
	}
	t.Run("unsandboxed", func(t *testing.T) {
		h := startHost(t, []string{"alpha", "beta"}, "  alpha: {config: {series: 1}}\n  beta: {config: {series: 1}}\n")
		check(t, h, 2)
	})
	t.Run("sandboxed", func(t *testing.T) {
		st := newSandboxTree(t)
		copyFile(t, filepath.Join(binDir, "chaos"), filepath.Join(st.bin, "chaos"), 0o755)
		if err := os.Symlink(filepath.Join(st.bin, "chaos"), filepath.Join(st.plugins, "plexporter-alpha")); err != nil {
			t.Fatal(err)
		}
		h := startSandboxHost(t, st, "  alpha: {config: {series: 1}}\n")
		check(t, h, 1)
	})
}

// nice is a thread's nice value (field 19 of /proc/<tid>/stat).
func nice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// descendants are every process below pid.
func descendants(pid int) []int {
	var out []int
	for _, c := range children(pid) {
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	return out
}

// Sandboxed, the plugins' CPU weight class is their cgroups' (a nice value
// orders only a group's own threads): the host runs in its own group, the
// plugins' groups below a sibling parent at a tenth of the weight (v2:
// host/ and plexporter/ of the host's cgroup, cpu.weight 10; v1's cpu
// hierarchy: plexporter/host and plexporter/plugins, cpu.shares 102). Read
// back from /proc and the cgroup files with a real plugin running. Before,
// in v1 the host stayed in its own group beside the plugins' parent at the
// default weight (the test fails: the host's group is not .../host).
func TestPluginsWeighBelowTheHost(t *testing.T) {
	st := newSandboxTree(t)
	copyFile(t, filepath.Join(binDir, "chaos"), filepath.Join(st.bin, "chaos"), 0o755)
	if err := os.Symlink(filepath.Join(st.bin, "chaos"), filepath.Join(st.plugins, "plexporter-alpha")); err != nil {
		t.Fatal(err)
	}
	h := startSandboxHost(t, st, "  alpha: {config: {series: 1}}\n")
	if _, mfs := h.scrape(""); value(mfs, "plexporter_plugin_up", "plugin", "alpha") != 1 {
		t.Fatal("alpha not up")
	}
	v2 := false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		v2 = true
	}
	cpuPath := func(pid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(l, ":", 3)
			if len(parts) == 3 && ((v2 && parts[1] == "") || (!v2 && slices.Contains(strings.Split(parts[1], ","), "cpu"))) {
				return parts[2]
			}
		}
		t.Fatalf("no cpu cgroup for %d in %s", pid, b)
		return ""
	}
	mount, weight, want := "/sys/fs/cgroup/cpu", "cpu.shares", "102"
	if v2 {
		mount, weight, want = "/sys/fs/cgroup", "cpu.weight", "10"
	}
	hostGroup := cpuPath(h.cmd.Process.Pid)
	if filepath.Base(hostGroup) != "host" {
		t.Fatalf("the host runs in the cgroup %s, want a host/ group of its own", hostGroup)
	}
	var plugin string
	for _, pid := range descendants(h.cmd.Process.Pid) {
		if p := cpuPath(pid); strings.HasPrefix(filepath.Base(p), "alpha.") {
			plugin = p
		}
	}
	if plugin == "" {
		t.Fatal("no process of the plugin in a group of its own")
	}
	parent := filepath.Dir(plugin)
	if filepath.Dir(parent) != filepath.Dir(hostGroup) {
		t.Errorf("the plugins' parent %s is not the host group %s's sibling", parent, hostGroup)
	}
	for _, g := range []string{plugin, parent} {
		b, err := os.ReadFile(filepath.Join(mount, g, weight))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s/%s = %q (%v), want %s", g, weight, b, err, want)
		}
	}
}

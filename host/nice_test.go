package main

import (
	"fmt"
	"os"
	"path/filepath"
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

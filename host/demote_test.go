package main

// Issue 28: a plugin past its budgets is demoted to the lowest CPU weight
// of its cgroup, so that the CPU its flood costs at the moment every
// plugin is collected stops delaying the healthy plugins' collects.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cpuWeightFile is the file holding the CPU weight of the sandboxed
// plugin's cgroup made by the host h (v1: cpu.shares below
// plexporter/plugins; v2: cpu.weight below the host's plexporter group).
func cpuWeightFile(t *testing.T, h *host, plugin string) string {
	t.Helper()
	name := fmt.Sprintf("%s.%d.*", plugin, h.cmd.Process.Pid)
	for _, pattern := range []string{"/sys/fs/cgroup/cpu/plexporter/plugins/" + name + "/cpu.shares", "/sys/fs/cgroup/plexporter/" + name + "/cpu.weight"} {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			return m[0]
		}
	}
	// cgroup v2 below a deeper host cgroup (a systemd unit's).
	var found string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || found != "" || !d.IsDir() {
			return nil
		}
		if ok, _ := filepath.Match(name, d.Name()); ok && filepath.Base(filepath.Dir(p)) == "plexporter" {
			if _, err := os.Stat(filepath.Join(p, "cpu.weight")); err == nil {
				found = filepath.Join(p, "cpu.weight")
			}
			return filepath.SkipDir
		}
		return nil
	})
	if found == "" {
		t.Skipf("no cgroup with a CPU weight for plugin %s of host %d", plugin, h.cmd.Process.Pid)
	}
	return found
}

func readTrimmed(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// A plugin flooding partial errors and one flooding its log are demoted
// (their cgroups' cpu.shares 2, or cpu.weight 1), logged once each with
// the budget; the healthy plugin keeps 102 (10). The error flooder, no
// longer collected, is restored after --plugin.cpu-demotion; the log
// flooder, still flooding, stays demoted. With --plugin.cpu-demotion=0
// (PLEXPORTER_DEMOTION_OFF=1, to show this test fails without the
// protection) nobody is demoted.
func TestFloodingPluginsAreDemoted(t *testing.T) {
	st := floodsTree(t)
	const quiet = 3 * time.Second
	demotion := "--plugin.cpu-demotion=" + quiet.String()
	if os.Getenv("PLEXPORTER_DEMOTION_OFF") != "" {
		demotion = "--plugin.cpu-demotion=0"
	}
	h := startSandboxHost(t, st, floodsYAML, "--scrape.timeout=5s", demotion)
	files := map[string]string{}
	for _, p := range []string{"healthy", "errors", "flood"} {
		files[p] = cpuWeightFile(t, h, p)
	}
	normal, low := "102", "2"
	if strings.HasSuffix(files["healthy"], "cpu.weight") {
		normal, low = "10", "1"
	}
	// The error flooder floods only when collected: not yet.
	if w := readTrimmed(files["errors"]); w != normal {
		t.Errorf("the error flooder's %s before any collect = %s, want %s", files["errors"], w, normal)
	}
	h.waitFor(minWait, "the error and log flooders demoted", func() bool {
		h.scrape("")
		return readTrimmed(files["errors"]) == low && readTrimmed(files["flood"]) == low
	})
	_, mfs := h.scrape("")
	for p, want := range map[string]float64{"healthy": 0, "errors": 1, "flood": 1} {
		if v := value(mfs, "plexporter_plugin_cpu_demoted", "plugin", p); v != want {
			t.Errorf("plexporter_plugin_cpu_demoted{plugin=%s} = %v, want %v", p, v, want)
		}
	}
	if w := readTrimmed(files["healthy"]); w != normal {
		t.Errorf("the healthy plugin's %s = %s, want %s", files["healthy"], w, normal)
	}
	logs := h.logs.String()
	for p, budget := range map[string]string{"errors": `budget="partial errors"`, "flood": `budget="log lines"`} {
		if n := len(linesWith(logs, "plugin="+p, "plugin went past its budget", budget)); n != 1 {
			t.Errorf("%d demotion lines for %s with %s, want 1 (scraped again and again)", n, p, budget)
		}
	}
	// Collected no more, the error flooder stays within its budgets: its
	// weight comes back after the quiet period; the log flooder's does not.
	h.waitFor(minWait, "the error flooder's weight restored", func() bool { return readTrimmed(files["errors"]) == normal })
	if w := readTrimmed(files["flood"]); w != low {
		t.Errorf("the still flooding log flooder's %s = %s, want %s", files["flood"], w, low)
	}
	_, mfs = h.scrape("?collect[]=healthy")
	if v := value(mfs, "plexporter_plugin_cpu_demoted", "plugin", "errors"); v != 0 {
		t.Errorf("plexporter_plugin_cpu_demoted{plugin=errors} after it stopped = %v, want 0", v)
	}
	if v := value(mfs, "plexporter_plugin_cpu_demotions_total", "plugin", "errors"); v != 1 {
		t.Errorf("plexporter_plugin_cpu_demotions_total{plugin=errors} = %v, want 1", v)
	}
	h.waitFor(minWait, "the restore logged", func() bool {
		return len(linesWith(h.logs.String(), "plugin=errors", "its CPU weight is restored")) == 1
	})
}

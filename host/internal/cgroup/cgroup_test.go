package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A v1-hybrid node: the host's group in each hierarchy from
// /proc/self/cgroup, a plexporter directory below it; cpu and cpuacct
// apart, as on this machine.
func TestDetectV1(t *testing.T) {
	mount := t.TempDir()
	os.MkdirAll(filepath.Join(mount, "memory/svc"), 0o755)
	for _, d := range []string{"memory", "pids", "cpu", "cpuacct"} {
		os.MkdirAll(filepath.Join(mount, d), 0o755)
		os.WriteFile(filepath.Join(mount, d, "cgroup.procs"), nil, 0o644)
	}
	self := filepath.Join(t.TempDir(), "cgroup")
	os.WriteFile(self, []byte("9:name=systemd:/\n8:pids:/\n4:memory:/svc\n2:cpuacct:/\n1:cpu:/\n0::/\n"), 0o644)
	r, err := detect(mount, self)
	if err != nil {
		t.Fatal(err)
	}
	if r.V2() || r.base["memory"] != filepath.Join(mount, "memory/svc/plexporter") || r.base["pids"] != filepath.Join(mount, "pids/plexporter") || r.base["cpuacct"] != filepath.Join(mount, "cpuacct/plexporter") || r.base["cpu"] != filepath.Join(mount, "cpu/plexporter/plugins") {
		t.Fatalf("bases = %v", r.base)
	}
	// cpu: the host in plexporter/host, the plugins below plexporter/plugins
	// at a tenth of the weight.
	for f, want := range map[string]string{"cpu/plexporter/host/cgroup.procs": "0", "cpu/plexporter/plugins/cpu.shares": "102"} {
		if b, _ := os.ReadFile(filepath.Join(mount, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	os.RemoveAll(filepath.Join(mount, "pids"))
	if _, err := detect(mount, self); err == nil || !strings.Contains(err.Error(), `"pids"`) {
		t.Fatalf("without a pids hierarchy: %v", err)
	}
}

// A group on this machine's real cgroup file system: limits written, then
// removed. Skipped where the host could not make one.
func TestGroupLimitsAndRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	r, err := Detect()
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	g, err := r.New("test", Limits{MemoryBytes: 64 << 20, Pids: 16, CPU: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	read := func(c, f string) string {
		b, _ := os.ReadFile(filepath.Join(g.dirs[c], f))
		return strings.TrimSpace(string(b))
	}
	parent := func(c, f string) string {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(g.dirs[c]), f))
		return strings.TrimSpace(string(b))
	}
	if r.V2() {
		if parent("", "cpu.weight") != "10" {
			t.Errorf("the plugins' parent's cpu.weight = %q, want 10", parent("", "cpu.weight"))
		}
	} else if parent("cpu", "cpu.shares") != "102" || filepath.Base(filepath.Dir(g.dirs["cpu"])) != "plugins" {
		t.Errorf("the plugins' parent %s: cpu.shares %q, want 102", filepath.Dir(g.dirs["cpu"]), parent("cpu", "cpu.shares"))
	}
	if r.V2() {
		if read("", "pids.max") != "16" || read("", "memory.max") != "67108864" || read("", "cpu.max") != "2000 10000" || read("", "cpu.weight") != "10" {
			t.Errorf("v2 limits not set")
		}
	} else if read("pids", "pids.max") != "16" || read("memory", "memory.limit_in_bytes") != "67108864" || read("cpu", "cpu.cfs_quota_us") != "2000" || read("cpu", "cpu.cfs_period_us") != "10000" || read("cpu", "cpu.shares") != "102" {
		t.Errorf("v1 limits not set")
	}
	if s := g.Stats(); s.Pids == nil || *s.Pids != 0 || s.OOMKills == nil {
		t.Errorf("stats = %+v", s)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", d, err)
		}
	}
}

// The bandwidth period is short (10 ms) so a throttled plugin runs in short
// bursts, and longer only where the quota would fall under the kernel's
// 1 ms minimum.
func TestCFSPeriod(t *testing.T) {
	for _, tc := range []struct {
		cpu           float64
		period, quota int
	}{
		{0.2, 10000, 2000},
		{0.5, 10000, 5000},
		{2, 10000, 20000},
		{0.1, 10000, 1000},
		{0.05, 20000, 1000},
		{0.01, 100000, 1000},
		{0.001, 100000, 1000}, // the kernel's minimum: 0.01 CPU
	} {
		if p, q := cfsPeriod(tc.cpu); p != tc.period || q != tc.quota {
			t.Errorf("cfsPeriod(%v) = %d, %d; want %d, %d", tc.cpu, p, q, tc.period, tc.quota)
		}
	}
}

// cpu and cpuacct mounted together (cpu,cpuacct, with cpu and cpuacct
// symlinks to it, as most v1 distributions do) are one hierarchy: the
// plugin gets one group there, the cpu one below plexporter/plugins, and
// the launcher joins it once. Without the check the cpuacct base was
// plexporter/ of the same hierarchy: two groups, and the launcher's last
// join could put the plugin in the one without its CPU limit.
func TestDetectV1CoMounted(t *testing.T) {
	mount := t.TempDir()
	for _, d := range []string{"memory", "pids", "cpu,cpuacct"} {
		os.MkdirAll(filepath.Join(mount, d), 0o755)
		os.WriteFile(filepath.Join(mount, d, "cgroup.procs"), nil, 0o644)
	}
	for _, l := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(mount, l)); err != nil {
			t.Fatal(err)
		}
	}
	self := filepath.Join(t.TempDir(), "cgroup")
	os.WriteFile(self, []byte("8:pids:/\n4:memory:/\n2:cpu,cpuacct:/\n0::/\n"), 0o644)
	r, err := detect(mount, self)
	if err != nil {
		t.Fatal(err)
	}
	if r.base["cpuacct"] != r.base["cpu"] || r.base["cpu"] != filepath.Join(mount, "cpu/plexporter/plugins") {
		t.Fatalf("bases = %v", r.base)
	}
	g, err := r.New("p", Limits{CPU: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Dirs()) != 3 || g.dirs["cpuacct"] != g.dirs["cpu"] {
		t.Fatalf("dirs = %v", g.dirs)
	}
	if b, _ := os.ReadFile(filepath.Join(g.dirs["cpu"], "cpu.cfs_quota_us")); string(b) != "5000" {
		t.Errorf("cpu.cfs_quota_us = %q, want 5000", b)
	}
}

// Demote writes the kernel's lowest CPU weight into the group's own file,
// in both hierarchies' names, and puts back the plugins' weight; nothing
// else of the group (its quota) changes. On fake cgroup trees (files in a
// temporary directory), read back.
func TestDemoteWritesTheWeight(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		dir := t.TempDir()
		c, file, normal, low := "cpu", "cpu.shares", "102", "2"
		if v2 {
			c, file, normal, low = "", "cpu.weight", "10", "1"
		}
		g := &Group{v2: v2, dirs: map[string]string{c: dir}}
		if err := g.set(Limits{CPU: 0.5}); err != nil {
			t.Fatal(err)
		}
		read := func(f string) string {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			return string(b)
		}
		quota := read("cpu.cfs_quota_us") + read("cpu.max")
		for _, step := range []struct {
			on   bool
			want string
		}{{true, low}, {true, low}, {false, normal}} {
			if err := g.Demote(step.on); err != nil {
				t.Fatal(err)
			}
			if got := read(file); got != step.want {
				t.Errorf("v2=%v: Demote(%v): %s = %q, want %q", v2, step.on, file, got, step.want)
			}
			if q := read("cpu.cfs_quota_us") + read("cpu.max"); q != quota {
				t.Errorf("v2=%v: Demote(%v) changed the quota %q to %q", v2, step.on, quota, q)
			}
		}
	}
}

// The same on this machine's real cgroup file system: the kernel accepts
// the minimum and reads it back.
func TestDemoteRealGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	r, err := Detect()
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	g, err := r.New("test", Limits{CPU: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	c, file, normal, low := "cpu", "cpu.shares", "102", "2"
	if r.V2() {
		c, file, normal, low = "", "cpu.weight", "10", "1"
	}
	read := func() string {
		b, _ := os.ReadFile(filepath.Join(g.dirs[c], file))
		return strings.TrimSpace(string(b))
	}
	if err := g.Demote(true); err != nil || read() != low {
		t.Fatalf("demoted: %s = %q (%v), want %s", file, read(), err, low)
	}
	if err := g.Demote(false); err != nil || read() != normal {
		t.Fatalf("restored: %s = %q (%v), want %s", file, read(), err, normal)
	}
}

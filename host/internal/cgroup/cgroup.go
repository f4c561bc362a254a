// Package cgroup gives each plugin a control group of its own under the
// host's: cgroup v2 where the node runs it (the host's cgroup from
// /proc/self/cgroup, delegated by systemd's Delegate=yes), else the v1
// memory, pids and cpu hierarchies (and cpuacct, for the usage metric). The
// group holds the plugin's memory (shmem, memfd, SysV and tmpfs pages
// included), task and CPU limits; the sandbox launcher joins it before it
// execs the plugin, so everything the plugin starts is in it too.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits are what a plugin's group enforces; zero values enforce nothing.
type Limits struct {
	MemoryBytes int64
	Pids        int
	CPU         float64 // CPUs, e.g. 0.5
}

// Low CPU weight for every plugin: a tenth of the default. A weight counts
// only against sibling groups: each plugin's group has it against the other
// plugins, and the plugins' parent against the host's own group, its only
// sibling, both below one group of the host's (v2: the host's delegated
// cgroup; v1: plexporter/ in the cpu hierarchy, into whose host/ the host
// moves itself). The host's scrape path is then scheduled before any
// plugin, and against the node's other work host and plugins together
// weigh what the host alone did. A tenth on a parent that was the node's
// sibling starved every plugin on a loaded machine instead; this layout
// took a healthy plugin's scrape p95 beside an error and a log flood from
// 15.8 to 7.0 ms (docs/design.md, "A healthy plugin beside hostile ones").
const (
	weightV2 = 10  // cpu.weight, default 100
	sharesV1 = 102 // cpu.shares, default 1024
)

// cfsPeriod is the CFS bandwidth period, in µs, for a quota of cpu CPUs:
// 10 ms, so that a plugin spinning on every CPU under limits.cpu 0.2 runs
// in bursts of 2 ms of each 10 ms, not 20 ms of each 100 ms (the kernel's
// default period), which a healthy plugin's scrape landing in the burst
// waited out. Longer where the quota would fall under the kernel's 1 ms
// minimum (below 0.1 CPU), at most the default 100 ms; limits.cpu under
// 0.01 gets 0.01.
func cfsPeriod(cpu float64) (period, quota int) {
	const minQuota, shortest, longest = 1000, 10000, 100000
	period = shortest
	if cpu > 0 && cpu*shortest < minQuota {
		period = min(longest, int(minQuota/cpu))
	}
	return period, max(minQuota, int(cpu*float64(period)))
}

// Root is where this host makes its plugins' groups.
type Root struct {
	v2   bool
	base map[string]string // controller ("" for v2) -> the host's plexporter directory
}

var (
	detectOnce sync.Once
	root       *Root
	rootErr    error
	seq        atomic.Int64
)

// Detect finds (once) where this host can make plugin groups, or why it
// cannot: the error names what is missing and what to do.
func Detect() (*Root, error) {
	detectOnce.Do(func() { root, rootErr = detect("/sys/fs/cgroup", "/proc/self/cgroup") })
	return root, rootErr
}

func detect(mount, self string) (*Root, error) {
	paths, err := ownPaths(self)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		return detectV2(mount, paths[""])
	}
	return detectV1(mount, paths)
}

// ownPaths maps each controller of /proc/self/cgroup to the host's path in
// its hierarchy ("" is the v2 one).
func ownPaths(self string) (map[string]string, error) {
	f, err := os.Open(self)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// hostDir is the host's own group in a hierarchy mounted at mount: its
// path there, or the mount's root where the path is not visible (a
// container's cgroup namespace or bind mount shows its own group as root).
func hostDir(mount, path string) string {
	d := filepath.Join(mount, path)
	if _, err := os.Stat(d); err != nil {
		return mount
	}
	return d
}

func detectV2(mount, path string) (*Root, error) {
	own := hostDir(mount, path)
	have, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !strings.Contains(" "+strings.TrimSpace(string(have))+" ", " "+c+" ") {
			return nil, fmt.Errorf("cgroup v2 controller %q is not available in the host's cgroup %s (delegate it: Delegate=yes in the systemd unit)", c, own)
		}
	}
	// No processes in a group that hands controllers to its children: the
	// host moves itself into a leaf of its own group first.
	leaf := filepath.Join(own, "host")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cannot create a cgroup under the host's cgroup %s (read-only cgroup file system or no delegation: Delegate=yes in the systemd unit): %w", own, err)
	}
	if err := write(leaf, "cgroup.procs", "0"); err != nil {
		return nil, fmt.Errorf("cannot move the host into %s: %w", leaf, err)
	}
	base := filepath.Join(own, "plexporter")
	for _, d := range []string{own, base} {
		if d == base {
			if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, err
			}
		}
		if err := write(d, "cgroup.subtree_control", "+memory +pids +cpu"); err != nil {
			return nil, fmt.Errorf("cannot enable the memory, pids and cpu controllers in %s (other processes in the host's cgroup, or no delegation): %w", d, err)
		}
	}
	// The plugins together below the host's leaf (weight 100).
	if err := write(base, "cpu.weight", strconv.Itoa(weightV2)); err != nil {
		return nil, fmt.Errorf("cannot set the plugins' CPU weight in %s: %w", base, err)
	}
	return &Root{v2: true, base: map[string]string{"": base}}, nil
}

func detectV1(mount string, paths map[string]string) (*Root, error) {
	r := &Root{base: map[string]string{}}
	seen := map[string]string{} // hierarchy (symlinks resolved) -> controller
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		m := filepath.Join(mount, c)
		if _, err := os.Stat(filepath.Join(m, "cgroup.procs")); err != nil {
			if c == "cpuacct" {
				continue // only the usage metric needs it
			}
			return nil, fmt.Errorf("no cgroup v2 and no cgroup v1 %q hierarchy at %s", c, m)
		}
		// Controllers mounted together (cpu,cpuacct, with cpu and cpuacct
		// symlinks to it) are one hierarchy: one group, the first's.
		if real, err := filepath.EvalSymlinks(m); err == nil {
			if first, ok := seen[real]; ok {
				r.base[c] = r.base[first]
				continue
			}
			seen[real] = c
		}
		p, ok := paths[c]
		if !ok {
			p = "/"
		}
		base := filepath.Join(hostDir(m, p), "plexporter")
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cannot create the cgroup %s (read-only cgroup file system?): %w", base, err)
		}
		if c == "cpu" {
			plugins, err := cpuLayoutV1(base)
			if err != nil {
				return nil, err
			}
			base = plugins
		}
		r.base[c] = base
	}
	return r, nil
}

// cpuLayoutV1 gives the cpu hierarchy cgroup v2's layout below svc (the
// host's plexporter group): the host moves itself into svc/host (default
// shares), the plugins' groups go below svc/plugins (sharesV1), so that the
// plugins' low weight counts against the host only. It returns
// svc/plugins.
func cpuLayoutV1(svc string) (string, error) {
	host, plugins := filepath.Join(svc, "host"), filepath.Join(svc, "plugins")
	for _, d := range []string{host, plugins} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("cannot create the cgroup %s (read-only cgroup file system?): %w", d, err)
		}
	}
	if err := write(plugins, "cpu.shares", strconv.Itoa(sharesV1)); err != nil {
		return "", fmt.Errorf("cannot set the plugins' CPU weight in %s: %w", plugins, err)
	}
	if err := write(host, "cgroup.procs", "0"); err != nil {
		return "", fmt.Errorf("cannot move the host into %s: %w", host, err)
	}
	return plugins, nil
}

// V2 tells the hierarchy: for messages.
func (r *Root) V2() bool { return r.v2 }

// Group is one plugin's control group (one directory per v1 hierarchy).
type Group struct {
	v2   bool
	dirs map[string]string // controller ("" for v2) -> directory
}

// New makes a group for plugin with limits l. Its name carries the host's
// pid and a sequence number, so two hosts sharing a cgroup, or a plugin's
// old and new supervisor, never share a group.
func (r *Root) New(plugin string, l Limits) (*Group, error) {
	name := fmt.Sprintf("%s.%d.%d", plugin, os.Getpid(), seq.Add(1))
	g := &Group{v2: r.v2, dirs: map[string]string{}}
	for c, base := range r.base {
		d := filepath.Join(base, name)
		if slices.Contains(slices.Collect(maps.Values(g.dirs)), d) {
			g.dirs[c] = d // controllers mounted together
			continue
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			g.Remove()
			return nil, fmt.Errorf("plugin %s: create cgroup: %w", plugin, err)
		}
		g.dirs[c] = d
	}
	if err := g.set(l); err != nil {
		g.Remove()
		return nil, fmt.Errorf("plugin %s: set cgroup limits: %w", plugin, err)
	}
	return g, nil
}

func (g *Group) set(l Limits) error {
	quota, period := "max", 100000
	if l.CPU > 0 {
		p, q := cfsPeriod(l.CPU)
		quota, period = strconv.Itoa(q), p
	}
	if g.v2 {
		d := g.dirs[""]
		steps := [][2]string{{"cpu.weight", strconv.Itoa(weightV2)}, {"cpu.max", quota + " " + strconv.Itoa(period)}}
		if l.MemoryBytes > 0 {
			steps = append(steps, [2]string{"memory.max", strconv.FormatInt(l.MemoryBytes, 10)}, [2]string{"memory.oom.group", "1"})
			if exists(d, "memory.swap.max") {
				steps = append(steps, [2]string{"memory.swap.max", "0"})
			}
		}
		if l.Pids > 0 {
			steps = append(steps, [2]string{"pids.max", strconv.Itoa(l.Pids)})
		}
		for _, s := range steps {
			if err := write(d, s[0], s[1]); err != nil {
				return err
			}
		}
		return nil
	}
	if quota == "max" {
		quota = "-1"
	}
	steps := [][3]string{{"cpu", "cpu.shares", strconv.Itoa(sharesV1)}, {"cpu", "cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu", "cpu.cfs_quota_us", quota}}
	if l.MemoryBytes > 0 {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		steps = append(steps, [3]string{"memory", "memory.limit_in_bytes", v})
		if exists(g.dirs["memory"], "memory.memsw.limit_in_bytes") {
			steps = append(steps, [3]string{"memory", "memory.memsw.limit_in_bytes", v}) // no swap either
		}
	}
	if l.Pids > 0 {
		steps = append(steps, [3]string{"pids", "pids.max", strconv.Itoa(l.Pids)})
	}
	for _, s := range steps {
		if err := write(g.dirs[s[0]], s[1], s[2]); err != nil {
			return err
		}
	}
	return nil
}

// The kernel's lowest CPU weights, a demoted plugin's (Group.Demote):
// against the other plugins' sharesV1/weightV2 it gets 1/51 or 1/10 of
// the CPU they want at the same moment, and keeps whatever they leave.
const (
	demotedWeightV2 = 1 // cpu.weight, minimum 1
	demotedSharesV1 = 2 // cpu.shares, minimum 2
)

// Demote lowers the group's CPU weight to the kernel's minimum (on) or
// puts back every plugin's (off). The host demotes a plugin that went past
// one of its budgets (a flood of partial errors or log lines), so that its
// CPU, spent at the moment every plugin is collected, stops delaying the
// others' collects. Limits (quota, memory, pids) are not touched.
func (g *Group) Demote(on bool) error {
	if g.v2 {
		v := weightV2
		if on {
			v = demotedWeightV2
		}
		return write(g.dirs[""], "cpu.weight", strconv.Itoa(v))
	}
	v := sharesV1
	if on {
		v = demotedSharesV1
	}
	return write(g.dirs["cpu"], "cpu.shares", strconv.Itoa(v))
}

// Dirs are the directories whose cgroup.procs the plugin's launcher joins.
func (g *Group) Dirs() []string {
	out := make([]string, 0, len(g.dirs))
	for _, d := range g.dirs {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// Stats are what the group has counted since it was made; a field the
// kernel does not offer is nil (never a made-up 0).
type Stats struct {
	CPUSeconds       *float64
	ThrottledSeconds *float64
	MemoryBytes      *float64
	MemoryPeakBytes  *float64
	Pids             *float64
	OOMKills         *float64
}

// Stats reads the group's counters.
func (g *Group) Stats() Stats {
	var s Stats
	if g.v2 {
		d := g.dirs[""]
		cpu := keyed(d, "cpu.stat")
		s.CPUSeconds = scale(cpu["usage_usec"], 1e-6)
		s.ThrottledSeconds = scale(cpu["throttled_usec"], 1e-6)
		s.MemoryBytes = single(d, "memory.current")
		s.MemoryPeakBytes = single(d, "memory.peak")
		s.Pids = single(d, "pids.current")
		s.OOMKills = keyed(d, "memory.events")["oom_kill"]
		return s
	}
	if d, ok := g.dirs["cpuacct"]; ok {
		s.CPUSeconds = scale(single(d, "cpuacct.usage"), 1e-9)
	}
	s.ThrottledSeconds = scale(keyed(g.dirs["cpu"], "cpu.stat")["throttled_time"], 1e-9)
	s.MemoryBytes = single(g.dirs["memory"], "memory.usage_in_bytes")
	s.MemoryPeakBytes = single(g.dirs["memory"], "memory.max_usage_in_bytes")
	s.Pids = single(g.dirs["pids"], "pids.current")
	s.OOMKills = keyed(g.dirs["memory"], "memory.oom_control")["oom_kill"]
	return s
}

// Remove kills whatever is left in the group and removes it, retrying for
// a few seconds while the killed tasks exit.
func (g *Group) Remove() error {
	var err error
	for try := 0; try < 50; try++ {
		err = nil
		for _, d := range g.dirs {
			if exists(d, "cgroup.kill") {
				_ = write(d, "cgroup.kill", "1")
			} else if b, rerr := os.ReadFile(filepath.Join(d, "cgroup.procs")); rerr == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, _ := strconv.Atoi(f); pid > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if rerr := os.Remove(d); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = rerr
			}
		}
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func write(dir, file, value string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
}

func exists(dir, file string) bool {
	_, err := os.Stat(filepath.Join(dir, file))
	return err == nil
}

func single(dir, file string) *float64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return nil
	}
	return &v
}

func keyed(dir, file string) map[string]*float64 {
	out := map[string]*float64{}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[k] = &f
		}
	}
	return out
}

func scale(v *float64, by float64) *float64 {
	if v == nil {
		return nil
	}
	s := *v * by
	return &s
}

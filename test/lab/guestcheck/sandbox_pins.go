package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkProcfsGrantsHeld: every installed plugin's process holds a
// descriptor of each procfs path its manifest grants, resolved for its own
// pid (/proc/self/mountinfo → /proc/<pid>/mountinfo). The launcher opens
// them before it builds the Landlock ruleset and the plugin inherits them,
// so that the rules still match after a dentry reclaim (README Findings 2).
// reclaim/<plugin> sees the effect only for paths read during its two
// scrapes; this sees the mechanism for every grant, ebpf's every-60-s
// {procfs}/self/mounts included.
func checkProcfsGrantsHeld(l *lab) error {
	procs, err := pluginPIDs()
	if err != nil {
		return err
	}
	var errs []error
	held := 0
	for _, p := range l.plugins {
		pid, ok := procs[p]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no process runs %s/plexporter-%s", p, pluginDir, p))
			continue
		}
		grants, err := manifestProcfsGrants(filepath.Join(pluginDir, "plexporter-"+p+".yaml"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fds, err := openPaths(pid)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		for _, g := range grants {
			want := forPID(g, pid)
			if _, err := os.Stat(want); err != nil {
				continue // a missing path has no rule either
			}
			if !fds[want] {
				errs = append(errs, fmt.Errorf("%s (pid %d): grants %s but holds no descriptor of %s", p, pid, g, want))
				continue
			}
			held++
		}
	}
	l.note("%d granted procfs paths held by %d plugins", held, len(l.plugins))
	return errors.Join(errs...)
}

// pluginPIDs maps plugin name to the pid of the process running its binary.
func pluginPIDs() (map[string]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != pluginDir {
			continue
		}
		out[strings.TrimPrefix(filepath.Base(exe), "plexporter-")] = pid
	}
	return out, nil
}

// manifestProcfsGrants are the read_only and read_write grants of the
// installed manifest under {procfs} or /proc, with {procfs} as /proc (the
// guest's host runs with the default --path.procfs).
func manifestProcfsGrants(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("installed manifest: %w", err)
	}
	var m struct {
		Paths struct {
			ReadOnly  []string `yaml:"read_only"`
			ReadWrite []string `yaml:"read_write"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, g := range append(m.Paths.ReadOnly, m.Paths.ReadWrite...) {
		g = strings.Replace(g, "{procfs}", "/proc", 1)
		if g == "/proc" || strings.HasPrefix(g, "/proc/") {
			out = append(out, g)
		}
	}
	return out, nil
}

// forPID is a /proc path as the process pid resolves it: /proc/self is its
// own directory.
func forPID(path string, pid int) string {
	if rest, ok := strings.CutPrefix(path, "/proc/self"); ok && (rest == "" || rest[0] == '/') {
		return "/proc/" + strconv.Itoa(pid) + rest
	}
	return path
}

// openPaths are the paths of the process's open descriptors.
func openPaths(pid int) (map[string]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[target] = true
		}
	}
	return out, nil
}

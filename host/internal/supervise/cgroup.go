package supervise

import (
	"fmt"

	"github.com/plexporter/plexporter/host/internal/cgroup"
	"github.com/plexporter/plexporter/host/internal/launch"
)

// openGroup makes the plugin's cgroup for the supervisor's lifetime (its
// counters, OOM kills included, span the restarts); without one the
// launcher falls back to rlimits, which the host has said once at start
// (sandbox.Resolve). Loop only.
func (s *Supervisor) openGroup() {
	spec := s.settings.Sandbox
	if spec == nil {
		return
	}
	root, err := cgroup.Detect()
	if err != nil {
		return // warned once by Resolve
	}
	g, err := root.New(s.plugin.Name, cgroup.Limits{MemoryBytes: spec.MemoryBytes, Pids: spec.Pids, CPU: spec.CPU})
	if err != nil {
		s.log.Warn("no cgroup for the plugin: limits.pids and limits.cpu are not enforced and limits.memory counts private memory only (RLIMIT_DATA)", "err", err)
		return
	}
	s.mu.Lock()
	s.group = g
	s.mu.Unlock()
}

// removeGroup removes the plugin's cgroup once its process is gone.
func (s *Supervisor) removeGroup() {
	s.mu.Lock()
	g := s.group
	s.group = nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	if err := g.Remove(); err != nil {
		s.log.Warn("cannot remove the plugin's cgroup", "err", err)
	}
}

// hasGroup reports whether the plugin has a cgroup.
func (s *Supervisor) hasGroup() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group != nil
}

// withGroup is o with the plugin's cgroup for the launcher to join.
func (s *Supervisor) withGroup(o launch.Options) launch.Options {
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g == nil || o.Sandbox == nil {
		return o
	}
	spec := *o.Sandbox
	spec.Cgroups = g.Dirs()
	o.Sandbox = &spec
	return o
}

// oomKills is the group's OOM-kill count, -1 where there is none.
func (s *Supervisor) oomKills() float64 {
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g == nil {
		return -1
	}
	if n := g.Stats().OOMKills; n != nil {
		return *n
	}
	return -1
}

// exitError says why the plugin exited, naming the OOM killer when the
// group's count rose while it ran (before: the count at its start).
func (s *Supervisor) exitError(proc *launch.Process, before float64) error {
	if after := s.oomKills(); before >= 0 && after > before {
		return fmt.Errorf("plugin exited: killed by the kernel's OOM killer over its memory limit (limits.memory), %v", exitText(proc.ExitError()))
	}
	return fmt.Errorf("plugin exited: %v", exitText(proc.ExitError()))
}

package supervise

import (
	"errors"
	"io/fs"
	"time"

	"github.com/plexporter/plexporter/internal/wire"
)

// DefaultCPUDemotion is how long a plugin that went past one of its
// budgets keeps the lowest CPU weight after its last offence
// (--plugin.cpu-demotion).
const DefaultCPUDemotion = time.Minute

// The budgets whose excess demotes a plugin, as logged and documented.
const (
	budgetErrors = "partial errors"
	budgetLog    = "log lines"
)

// Demotion is a plugin's CPU demotion, for self-metrics: whether its
// cgroup has the lowest CPU weight now, and how many times it got it.
type Demotion struct {
	On    bool
	Count uint64
}

// A plugin that goes past one of its budgets is demoted: its cgroup's CPU
// weight goes to the kernel's minimum (cgroup.Group.Demote) for as long as
// it keeps offending and for Settings.CPUDemotion after. The budgets
// already drop what it sends past them; what they cannot take back is the
// CPU the plugin spends making it, at the moment every plugin is
// collected: a healthy plugin's collect then waited for a CPU behind it
// (docs/design.md, "A healthy plugin beside hostile ones"). Demoted, the
// offender runs on what the others leave.

// offended records that the plugin went past budget just now, and demotes
// it if it is not already.
func (s *Supervisor) offended(budget string) {
	if s.settings.CPUDemotion <= 0 {
		return
	}
	now := time.Now()
	s.demoteMu.Lock()
	defer s.demoteMu.Unlock()
	s.mu.Lock()
	g := s.group
	s.lastOffence = now
	on := s.demotion.On
	s.mu.Unlock()
	if g == nil || on {
		return
	}
	if err := g.Demote(true); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return // the group is being removed: the plugin is stopping
		}
		if !s.demoteWarned { // once: a failing write fails at every offence
			s.demoteWarned = true
			s.log.Warn("cannot lower the CPU weight of a plugin past its budget", "budget", budget, "err", err)
		}
		return
	}
	s.mu.Lock()
	s.demotion.On = true
	s.demotion.Count++
	s.demotedAt = now
	s.mu.Unlock()
	select {
	case s.demotedNow <- struct{}{}:
	default:
	}
	s.log.Warn("plugin went past its budget; its CPU weight is lowered to the minimum until it stays within its budgets for the demotion period (plexporter_plugin_cpu_demoted)",
		"budget", budget, "demotion", s.settings.CPUDemotion)
}

// restoreIfQuiet puts back the CPU weight of a demoted plugin that has
// stayed within its budgets for Settings.CPUDemotion.
func (s *Supervisor) restoreIfQuiet(now time.Time) {
	s.demoteMu.Lock()
	defer s.demoteMu.Unlock()
	s.mu.Lock()
	g, on, quiet, since := s.group, s.demotion.On, now.Sub(s.lastOffence), s.demotedAt
	s.mu.Unlock()
	if g == nil || !on || quiet < s.settings.CPUDemotion {
		return
	}
	if err := g.Demote(false); err != nil {
		s.log.Warn("cannot restore the CPU weight of a demoted plugin", "err", err)
		return
	}
	s.mu.Lock()
	s.demotion.On = false
	s.mu.Unlock()
	s.log.Info("plugin stayed within its budgets; its CPU weight is restored", "demoted_for", now.Sub(since).Round(time.Second))
}

// noteCollect demotes a plugin whose collect went past its partial-error
// budget (errors discarded, or the stream stopped by the flood).
func (s *Supervisor) noteCollect(res *Collection) {
	if res.ErrorsDropped > 0 || errors.Is(res.Err, wire.ErrErrorFlood) {
		s.offended(budgetErrors)
	}
}

// watchBudgets runs beside the supervision loop while the plugin has a
// cgroup: it demotes a plugin whose log lines are being dropped and
// restores one that has been quiet long enough. The log budget drops
// lines whenever the plugin writes them, not only at collects. Nothing
// ticks while every plugin keeps its budgets (a host between scrapes does
// no work): the first dropped line wakes it (logDrop); while the plugin is
// demoted it looks again every quarter of the demotion period, reading
// the drop counter rather than waking at every dropped line of a flood.
func (s *Supervisor) watchBudgets(done <-chan struct{}) {
	every := max(s.settings.CPUDemotion/4, 10*time.Millisecond)
	t := time.NewTimer(every)
	t.Stop()
	defer t.Stop()
	seen := s.logDropped.Load()
	for {
		var drops <-chan struct{}
		var tick <-chan time.Time
		s.mu.Lock()
		on := s.demotion.On
		s.mu.Unlock()
		if on {
			t.Reset(every)
			tick = t.C
		} else {
			drops = s.logDrop
		}
		select {
		case <-done:
			return
		case <-drops:
		case <-tick:
		case <-s.demotedNow: // a collect demoted it: look again on the tick
		}
		if n := s.logDropped.Load(); n > seen {
			seen = n
			s.offended(budgetLog)
		}
		s.restoreIfQuiet(time.Now())
	}
}

// noteLogDrop is the log budget's hook: a line was dropped just now. It
// only wakes watchBudgets (a send that never blocks: one pending wake-up
// stands for any number of lines).
func (s *Supervisor) noteLogDrop() {
	select {
	case s.logDrop <- struct{}{}:
	default:
	}
}

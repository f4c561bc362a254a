package supervise

import "time"

// restartPolicy decides how long a plugin that crashed or failed to start
// waits before its next start.
//
// An isolated failure costs MinBackoff (1 s), every time: a plugin killed
// now and then, even every 10 s, is back at once. Only a crash loop backs
// off: a plugin that fails more than CrashBudget times within CrashWindow
// (5 in 30 s: it cannot stay up for about 6 s) waits twice as long after
// each further failure (2 s, 4 s, … up to MaxBackoff), and leaves the loop,
// back to MinBackoff, only once a run lasted HealthyAfter (30 s). The
// window is what makes the budget decay: failures older than it no longer
// count. The loop ends on a healthy run rather than on the window, because
// a loop whose delays grew past the window would otherwise look isolated
// again and restart at full speed.
type restartPolicy struct {
	min, max     time.Duration
	budget       int
	window       time.Duration
	healthyAfter time.Duration

	recent    []time.Time   // failures within window, oldest first
	loopDelay time.Duration // the last delay of a crash loop; 0: not in one
}

func newRestartPolicy(s Settings) *restartPolicy {
	return &restartPolicy{min: s.MinBackoff, max: s.MaxBackoff, budget: s.CrashBudget, window: s.CrashWindow, healthyAfter: s.HealthyAfter}
}

// failed records a failure at now, after a run of ran (0 for a start that
// failed), and returns the delay before the next start and whether the
// plugin is in a crash loop.
func (p *restartPolicy) failed(now time.Time, ran time.Duration) (time.Duration, bool) {
	if ran >= p.healthyAfter {
		p.recent, p.loopDelay = p.recent[:0], 0
	}
	keep := 0
	for keep < len(p.recent) && now.Sub(p.recent[keep]) >= p.window {
		keep++
	}
	p.recent = append(p.recent[keep:], now)
	if p.loopDelay == 0 && len(p.recent) <= p.budget {
		return p.min, false
	}
	if p.loopDelay == 0 {
		p.loopDelay = p.min
	}
	p.loopDelay = min(p.loopDelay*2, p.max)
	return p.loopDelay, true
}

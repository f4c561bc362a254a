package fleet

import (
	"cmp"
	"slices"

	"github.com/plexporter/plexporter/host/internal/supervise"
)

// instance is what plan needs of a supervised plugin: what it runs and
// whether it is up, and the settings it rejected on an earlier rescan.
type instance struct {
	identity string
	settings supervise.Settings
	running  bool       // supervise.Running: a replacement is tried beside it
	rejected *rejection // nil: none remembered
}

// step is one kind of action of a reconcile.
type step int

const (
	// stepStart starts a wanted plugin that has no instance.
	stepStart step = iota
	// stepStop stops an instance no longer wanted (its binary removed, now
	// refused or disabled) and forgets its rejection.
	stepStop
	// stepRestart stops an instance that is not running (crashed,
	// misconfigured) whose binary or settings changed, then starts the new.
	stepRestart
	// stepTry starts the new instance beside the running one, which it
	// replaces unless it rejects its settings (Fleet.try).
	stepTry
	// stepForget forgets a rejection: the settings are back to the ones
	// the instance runs with.
	stepForget
)

func (s step) String() string {
	return [...]string{"start", "stop", "restart", "try", "forget"}[s]
}

// action is one thing a reconcile does to one plugin.
type action struct {
	step step
	name string
	why  string // stepRestart, stepTry: what changed
	want wanted // stepStart, stepRestart, stepTry: what to run
}

// Reasons for a replacement, as logged.
const (
	whyBinary   = "plugin binary replaced"
	whySettings = "plugin settings changed"
)

// plan compares the supervised instances with what the disk and the config
// file want and returns what to do, sorted by plugin name. It has no side
// effects. An unchanged plugin needs nothing (or only its rejection
// forgotten); a changed one whose new settings it rejected already is left
// alone until they change again.
func plan(current map[string]instance, want map[string]wanted) []action {
	var out []action
	for name, cur := range current {
		w, ok := want[name]
		var why string
		switch {
		case !ok:
			out = append(out, action{step: stepStop, name: name})
			continue
		case cur.identity != w.plugin.Identity:
			why = whyBinary
		case !cur.settings.Equal(w.settings):
			why = whySettings
		default:
			if cur.rejected != nil {
				out = append(out, action{step: stepForget, name: name})
			}
			continue
		}
		if r := cur.rejected; r != nil && r.identity == w.plugin.Identity && r.settings.Equal(w.settings) {
			continue // rejected already; tried again once they change
		}
		s := stepRestart
		if cur.running {
			s = stepTry
		}
		out = append(out, action{step: s, name: name, why: why, want: w})
	}
	for name, w := range want {
		if _, ok := current[name]; !ok {
			out = append(out, action{step: stepStart, name: name, want: w})
		}
	}
	slices.SortFunc(out, func(a, b action) int { return cmp.Compare(a.name, b.name) })
	return out
}

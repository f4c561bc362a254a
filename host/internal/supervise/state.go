package supervise

import "fmt"

// State is where a supervised plugin is in its life. Only the supervision
// loop changes it, and only along these transitions (allowed, below):
//
//	Starting      → Running | Backoff | Misconfigured | Refused
//	Running       → Backoff
//	Backoff       → Starting
//	every state   → Stopped (the host stopped the plugin)
//
// Misconfigured and Refused are final for a supervisor: restarting cannot
// help, so it does not happen; the fleet replaces the supervisor once the
// plugin's settings or binary change.
type State int

const (
	// Starting: process start, handshake, Info and Configure.
	Starting State = iota
	// Running: configured and answering Collect.
	Running
	// Backoff: the plugin crashed, failed to start or hung; it is started
	// again after a delay (restart.go): 1 s, growing only in a crash loop.
	Backoff
	// Misconfigured: the plugin rejected its settings (Configure answered
	// INVALID_ARGUMENT). Its process is stopped until the settings change.
	Misconfigured
	// Refused: the binary is not the one its manifest pins, its handshake
	// names an address the host does not dial, or it speaks another
	// protocol (launch.ProtocolError).
	Refused
	// Stopped: the host stopped the plugin. Final.
	Stopped
)

var stateNames = [...]string{
	Starting:      "starting",
	Running:       "running",
	Backoff:       "backoff",
	Misconfigured: "misconfigured",
	Refused:       "refused",
	Stopped:       "stopped",
}

// String is the name `plexporter plugins` shows.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// allowed lists every transition; Stopped is allowed from every state.
var allowed = map[State][]State{
	Starting:      {Running, Backoff, Misconfigured, Refused},
	Running:       {Backoff},
	Backoff:       {Starting},
	Misconfigured: {},
	Refused:       {},
}

// CanBecome reports whether next may follow s.
func (s State) CanBecome(next State) bool {
	if s == Stopped {
		return false
	}
	if next == Stopped {
		return true
	}
	for _, n := range allowed[s] {
		if n == next {
			return true
		}
	}
	return false
}

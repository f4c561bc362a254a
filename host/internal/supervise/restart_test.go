package supervise

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRestartPolicy(t *testing.T) {
	policy := func() *restartPolicy {
		return newRestartPolicy(Settings{}.withDefaults())
	}
	t0 := time.Unix(1_000_000, 0)
	type failure struct {
		at, ran time.Duration // since t0; the run before the failure
		want    time.Duration
		loop    bool
	}
	for name, seq := range map[string][]failure{
		"isolated crashes a minute apart": {
			{at: 0, ran: time.Hour, want: time.Second},
			{at: time.Minute, ran: 59 * time.Second, want: time.Second},
			{at: 2 * time.Minute, ran: 59 * time.Second, want: time.Second},
			{at: 3 * time.Minute, ran: 59 * time.Second, want: time.Second},
		},
		"a burst within the budget": {
			{at: 0, ran: time.Hour, want: time.Second},
			{at: 3 * time.Second, ran: 2 * time.Second, want: time.Second},
			{at: 6 * time.Second, ran: 2 * time.Second, want: time.Second},
			{at: 9 * time.Second, ran: 2 * time.Second, want: time.Second},
			{at: 12 * time.Second, ran: 2 * time.Second, want: time.Second},
		},
		"a crash loop backs off, and stays backed off past the window": {
			{at: 0, want: time.Second},
			{at: 1 * time.Second, want: time.Second},
			{at: 2 * time.Second, want: time.Second},
			{at: 3 * time.Second, want: time.Second},
			{at: 4 * time.Second, want: time.Second},
			{at: 5 * time.Second, want: 2 * time.Second, loop: true},
			{at: 7 * time.Second, want: 4 * time.Second, loop: true},
			{at: 11 * time.Second, want: 8 * time.Second, loop: true},
			{at: 19 * time.Second, want: 16 * time.Second, loop: true},
			{at: 35 * time.Second, want: 32 * time.Second, loop: true},
			{at: 67 * time.Second, want: time.Minute, loop: true},
			{at: 127 * time.Second, want: time.Minute, loop: true},
			{at: 187 * time.Second, ran: 29 * time.Second, want: time.Minute, loop: true},
		},
		"killed every 10 s: not a loop": {
			{at: 0, ran: time.Hour, want: time.Second},
			{at: 10 * time.Second, ran: 9 * time.Second, want: time.Second},
			{at: 20 * time.Second, ran: 9 * time.Second, want: time.Second},
			{at: 30 * time.Second, ran: 9 * time.Second, want: time.Second},
			{at: 40 * time.Second, ran: 9 * time.Second, want: time.Second},
			{at: 50 * time.Second, ran: 9 * time.Second, want: time.Second},
			{at: 60 * time.Second, ran: 9 * time.Second, want: time.Second},
			{at: 70 * time.Second, ran: 9 * time.Second, want: time.Second},
		},
		"a healthy run ends the loop": {
			{at: 0, want: time.Second},
			{at: 1 * time.Second, want: time.Second},
			{at: 2 * time.Second, want: time.Second},
			{at: 3 * time.Second, want: time.Second},
			{at: 4 * time.Second, want: time.Second},
			{at: 5 * time.Second, want: 2 * time.Second, loop: true},
			{at: 40 * time.Second, ran: 33 * time.Second, want: time.Second},
			{at: 41 * time.Second, want: time.Second},
		},
		"failures older than the window no longer count": {
			{at: 0, want: time.Second},
			{at: 5 * time.Second, ran: 4 * time.Second, want: time.Second},
			{at: 10 * time.Second, ran: 4 * time.Second, want: time.Second},
			{at: 15 * time.Second, ran: 4 * time.Second, want: time.Second},
			{at: 20 * time.Second, ran: 4 * time.Second, want: time.Second},
			{at: 31 * time.Second, ran: 10 * time.Second, want: time.Second}, // the 6th, but the one at 0 is out
			{at: 33 * time.Second, ran: time.Second, want: 2 * time.Second, loop: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := policy()
			for i, f := range seq {
				got, loop := p.failed(t0.Add(f.at), f.ran)
				if got != f.want || loop != f.loop {
					t.Errorf("failure %d at %v (ran %v): delay %v loop %v, want %v loop %v", i, f.at, f.ran, got, loop, f.want, f.loop)
				}
			}
		})
	}
}

// With the host's defaults, a plugin killed three times in a row is back
// after the isolated crash's 1 s delay every time, never a crash loop's.
// The delay is read from the supervisor's own record (its log and
// NextStart), not timed by the test: on a loaded machine the test's clock
// measures the machine.
func TestIsolatedCrashesRestartAtOnce(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	sup, logs := chaos(t, "victim", map[string]any{"pid_file": pidFile}, func(s *Settings) {
		s.MinBackoff, s.MaxBackoff = 0, 0 // the defaults
	})
	sup.Start()
	<-sup.FirstAttempt()
	for i := range 3 {
		pid := readPID(t, pidFile)
		os.Remove(pidFile) // the next start writes it again
		// Read before the kill: the supervisor can see the exit before a
		// clock read after kill(2) returns (it did, 0.2 ms earlier, at load).
		killed := time.Now()
		syscall.Kill(pid, syscall.SIGKILL)
		var st Status
		var seen time.Time
		waitFor(t, "the crash seen", func() bool {
			st, seen = sup.Status(), time.Now()
			return st.Restarts == i && !st.Up() || st.Restarts > i
		})
		// The supervisor saw the exit after the kill and before this
		// status was read, and schedules the start 1 s after it.
		if st.State == Backoff && (st.NextStart.Before(killed.Add(time.Second)) || st.NextStart.After(seen.Add(time.Second))) {
			t.Errorf("crash %d: next start due at %v, %v after the kill and %v after it was seen; want 1 s after the exit", i+1, st.NextStart, st.NextStart.Sub(killed), st.NextStart.Sub(seen))
		}
		waitFor(t, "the restart", func() bool { return sup.Status().Restarts == i+1 && sup.Status().Up() })
		if got := backoffs(logs.lines("level=ERROR", "plugin down")); len(got) != i+1 || got[i] != "1s" || len(logs.lines("crash loop")) != 0 {
			t.Errorf("crash %d: delays %v; want 1s for every isolated crash, no crash loop", i+1, got)
		}
		if !sup.Status().NextStart.IsZero() {
			t.Error("a running plugin has a next start")
		}
	}
}

// A plugin that exits right after every start is a crash loop: its delays
// grow after the budget; a run that lasts HealthyAfter ends the loop.
func TestCrashLoopBacksOffAndHealthEndsIt(t *testing.T) {
	crash := filepath.Join(t.TempDir(), "crash")
	os.WriteFile(crash, nil, 0o644)
	sup, logs := chaos(t, "looper", map[string]any{"exit_after": "10ms", "exit_while": crash}, func(s *Settings) {
		s.MinBackoff, s.MaxBackoff = 30*time.Millisecond, 250*time.Millisecond
		s.CrashBudget, s.CrashWindow, s.HealthyAfter = 3, time.Minute, 500*time.Millisecond
	})
	sup.Start()
	var sawBackoff bool
	waitFor(t, "eight failures", func() bool {
		if st := sup.Status(); st.State == Backoff {
			sawBackoff = true
			if st.NextStart.IsZero() || time.Until(st.NextStart) > 250*time.Millisecond {
				t.Errorf("in backoff, next start due at %v (in %v)", st.NextStart, time.Until(st.NextStart))
			}
		}
		return len(logs.lines("level=ERROR", "plugin down")) >= 8
	})
	if !sawBackoff {
		t.Error("never saw the Backoff state")
	}
	want := []string{"30ms", "30ms", "30ms", "60ms", "120ms", "240ms", "250ms", "250ms"}
	if got := backoffs(logs.lines("level=ERROR", "plugin down")[:8]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("delays %v, want %v", got, want)
	}
	if n := len(logs.lines("crash loop")); n != 5 {
		t.Errorf("%d failures logged as a crash loop, want the 5 beyond the budget", n)
	}

	// Healthy: it runs longer than HealthyAfter; its next crash costs MinBackoff.
	os.Remove(crash)
	waitFor(t, "running", func() bool { return sup.Status().Up() })
	time.Sleep(600 * time.Millisecond)
	before := len(logs.lines("level=ERROR", "plugin down"))
	sup.mu.Lock()
	proc := sup.proc
	sup.mu.Unlock()
	proc.Kill()
	waitFor(t, "the crash after a healthy run", func() bool { return len(logs.lines("level=ERROR", "plugin down")) > before })
	if got := backoffs(logs.lines("level=ERROR", "plugin down")[before:]); got[0] != "30ms" {
		t.Errorf("after a healthy run the delay is %v, want 30ms", got[0])
	}
}

var backoffAttr = regexp.MustCompile(`backoff=(\S+)`)

func backoffs(lines []string) []string {
	var out []string
	for _, l := range lines {
		if m := backoffAttr.FindStringSubmatch(l); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

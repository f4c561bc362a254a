// Package failtest lets a test prove that a check fails: it runs the check
// against a testing.TB that records failures instead of failing the test.
package failtest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TB is a testing.TB whose failures are recorded. Everything else (Helper,
// Cleanup, TempDir, Context, Log) is the real test's.
type TB struct {
	testing.TB

	mu       sync.Mutex
	failures []string
	fatal    bool
}

// Run calls check with a recording TB and returns it once check returned
// or stopped at a Fatal.
func Run(t testing.TB, check func(tb *TB)) *TB {
	t.Helper()
	tb := &TB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(tb)
	}()
	<-done
	return tb
}

func (tb *TB) record(fatal bool, msg string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failures = append(tb.failures, msg)
	tb.fatal = tb.fatal || fatal
}

func (tb *TB) Error(args ...any)                 { tb.record(false, fmt.Sprint(args...)) }
func (tb *TB) Errorf(format string, args ...any) { tb.record(false, fmt.Sprintf(format, args...)) }
func (tb *TB) Fail()                             { tb.record(false, "Fail") }
func (tb *TB) Fatal(args ...any)                 { tb.record(true, fmt.Sprint(args...)); runtime.Goexit() }
func (tb *TB) Fatalf(format string, args ...any) {
	tb.record(true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (tb *TB) FailNow() { tb.record(true, "FailNow"); runtime.Goexit() }

// Failed reports whether anything failed.
func (tb *TB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return len(tb.failures) > 0
}

// Failures returns the failure messages in order.
func (tb *TB) Failures() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.failures...)
}

// Expect fails t unless some failure message contains every one of
// parts, and lists the failures recorded when none does.
func (tb *TB) Expect(t testing.TB, parts ...string) {
	t.Helper()
	for _, f := range tb.Failures() {
		if containsAll(f, parts) {
			return
		}
	}
	t.Errorf("no failure mentions %q; failures:\n\t%s", parts, strings.Join(tb.Failures(), "\n\t"))
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

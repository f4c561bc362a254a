package main

import (
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fixturePlugin is a plugin closed when the test ends.
func fixturePlugin(t *testing.T) *plugin {
	p := newPlugin()
	t.Cleanup(func() { p.Close() })
	return p
}

// mustContain fails for each of lines the exposition does not have as a
// whole line (sdktest.Contains would also accept a longer value).
func mustContain(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains("\n"+text, "\n"+l+"\n") {
			t.Errorf("exposition lacks the line %q", l)
		}
	}
}

func lint(t *testing.T, text string) {
	t.Helper()
	sdktest.PromtoolClean(t, text, nil) // no seed name draws a finding
}

// waitDeadline bounds every wait of this package's tests for a condition:
// it only matters when the test fails, so it is long enough for a loaded
// CI machine, never a budget the code must meet.
const waitDeadline = 60 * time.Second

// waitFor polls cond until it holds, failing after waitDeadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitDeadline); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("condition not met within %s", waitDeadline)
}

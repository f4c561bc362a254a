package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// tuneGC sets plexporter-so's GOGC, unless the environment sets GOGC:
// the operator's setting wins.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "100")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100 in the environment: GC percent %d after tuneGC, want 100", got)
	}
	os.Unsetenv("GOGC") // t.Setenv restores it
	tuneGC()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("no GOGC in the environment: GC percent %d after tuneGC, want %d", got, gcPercent)
	}
}

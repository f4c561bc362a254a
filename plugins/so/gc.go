package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is plexporter-so's GOGC when the environment sets none. The
// library's data lives in C memory, which the Go garbage collector's pacer
// does not see: the process's Go heap is small (about 2 MB live in a
// 100k-series collect), so at the default of 100 the runtime's 4 MB floor
// makes the garbage collector run about 10 times per such collect, where a
// Go plugin of the same series, its label values in its heap, runs about 3
// times. At 200 (an 8 MB floor) plexporter-so collects garbage about as
// often per sample as that Go plugin, for about 4 MB more heap; GOMEMLIMIT, which the host sets
// from the manifest's limits.memory, still bounds it. Measured in
// docs/performance.md ("Shared-object collectors").
const gcPercent = 200

// tuneGC applies gcPercent unless GOGC is set.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
	}
}

package main

import (
	"testing"
	"time"
)

// A plugin writing to its stdout without end made the host read as fast
// as it wrote (issue 28: unbudgeted), on either of two paths: a Go plugin's
// os.Stdout, which go-plugin sends the host as messages on its GRPCStdio
// stream, and fd 1 itself (a C library's printf), the pipe the host reads
// the handshake from and then drains. The host now reads each at a rate
// (launch.DefaultStdioBudget, 256 KiB/s after a 1 MiB burst, and
// stdoutReadRate, 1 MiB/s after 1 MiB) and the plugin's writes beyond it
// block: it slows itself. The test counts what the plugin managed to
// write: within the budget plus what the pipes and HTTP/2 windows hold in
// between. Unbudgeted, the plugin wrote 71 MB in 3.7 s on the stream
// path under load (the test fails, its wait ending at floodBytes).
func TestStdoutFloodIsHeldToItsBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path        string
		rate, burst float64
	}{
		{"stream", 256 << 10, 1 << 20},
		{"fd", 1 << 20, 1 << 20},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			const (
				// go-plugin's pipe and chunk channel in the plugin, the stream's
				// and the connection's HTTP/2 windows, gRPC's and bufio's
				// buffers: generous.
				inFlight   = 8 << 20
				floodBytes = 64 << 20 // unbudgeted, passed within seconds
			)
			start := time.Now()
			h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 1, stdio_flood: "+tc.path+"}}\n")
			written := func() (float64, time.Duration) {
				_, mfs := h.scrape("")
				if v := value(mfs, "plexporter_plugin_scrape_success", "plugin", "alpha"); v != 1 {
					t.Fatalf("scrape_success %v, want 1: a plugin blocked on its stdout still collects", v)
				}
				return value(mfs, "chaos_stdio_written_bytes", "plugin", "alpha"), time.Since(start)
			}
			// Long enough for an unbudgeted flood to pass the bound many times
			// over; counted in scrapes, not read off a clock.
			var got float64
			var elapsed time.Duration
			for range 20 {
				got, elapsed = written()
				if got >= floodBytes {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			if got <= 0 {
				t.Fatal("no chaos_stdio_written_bytes: the plugin did not flood")
			}
			// elapsed is taken after the scrape that read got: the bound is
			// only ever too generous.
			bound := tc.burst + tc.rate*elapsed.Seconds() + inFlight
			if got > bound {
				t.Fatalf("the plugin wrote %.0f bytes to its stdout (%s) in %v; the budget allows %.0f (%.0f/s after %.0f, %d in flight)", got, tc.path, elapsed, bound, tc.rate, tc.burst, inFlight)
			}
			t.Logf("the plugin wrote %.1f MiB in %v (bound %.1f MiB)", got/(1<<20), elapsed.Round(time.Millisecond), bound/(1<<20))
		})
	}
}

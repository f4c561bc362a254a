package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// The cost goals of the issue: 64 agents each writing 10k events/s are
// drained for at most 2% of one core, a scrape of them costs at most
// 10 ms of CPU, and an idle reader costs only its timer wake-ups.
// Numbers are in README.md ("Cost").
const (
	benchAgents       = 64
	benchEventsPerSec = 10000
)

// benchRings creates the agents' rings (NIXL's default capacity, 4096).
func benchRings(b *testing.B) (string, []*ringWriter) {
	dir := b.TempDir()
	ws := make([]*ringWriter, benchAgents)
	for i := range ws {
		ws[i] = newRingWriter(b, filepath.Join(dir, fmt.Sprintf("%08x-worker-%d", i*7919, i)), layoutV4, 4096)
	}
	return dir, ws
}

// writeInterval writes what an agent writes between two drains:
// 10k events/s × 100 ms, in transfer groups of four.
func writeInterval(ws []*ringWriter, seq *uint64) {
	n := benchEventsPerSec * int(defaultDrainInterval/time.Millisecond) / 1000
	for _, w := range ws {
		for i := 0; i < n; i += 4 {
			*seq++
			for _, e := range transfer(*seq%300, *seq%9000, 4096+*seq%65536, *seq%2 == 0) {
				w.write(e)
			}
		}
	}
}

// threadCPU is the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func benchDrainer(dir string) (*drainer, *time.Time) {
	c := defaultConfig()
	c.TelemetryDirs = []string{dir}
	d := newDrainer(c, "")
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	return d, &now
}

// BenchmarkDrain64Agents: one drain pass (what the timer runs every
// 100 ms) over 64 rings holding 1000 new events each; one pass in ten also
// lists the directory, as with the default rescan_interval. core-% is the
// share of one core draining takes at 10 passes per second.
func BenchmarkDrain64Agents(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir, ws := benchRings(b)
	d, now := benchDrainer(dir)
	defer d.closeAll()
	d.pass(true)
	var seq uint64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		writeInterval(ws, &seq)
		*now = now.Add(defaultDrainInterval)
		b.StartTimer()
		t0 := threadCPU()
		d.pass(false)
		cpu += threadCPU() - t0
	}
	b.StopTimer()
	for _, w := range ws {
		if w.dropped != 0 || w.unread() != 0 {
			b.Fatalf("a ring dropped %d events / kept %d unread", w.dropped, w.unread())
		}
	}
	perPass := cpu / time.Duration(b.N)
	b.ReportMetric(float64(perPass.Nanoseconds()), "cpu-ns/pass")
	b.ReportMetric(float64(perPass*10)/float64(time.Second)*100, "core-%")
}

// BenchmarkIdlePass: one timer pass over 64 rings with nothing new.
func BenchmarkIdlePass(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir, _ := benchRings(b)
	d, _ := benchDrainer(dir)
	defer d.closeAll()
	d.pass(true)
	t0 := threadCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.pass(false)
	}
	b.ReportMetric(float64((threadCPU()-t0).Nanoseconds())/float64(b.N), "cpu-ns/pass")
}

// BenchmarkRescan64: one listing of a directory of 64 rings.
func BenchmarkRescan64(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir, _ := benchRings(b)
	d, _ := benchDrainer(dir)
	defer d.closeAll()
	d.pass(true)
	t0 := threadCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.rescan()
	}
	b.ReportMetric(float64((threadCPU()-t0).Nanoseconds())/float64(b.N), "cpu-ns/rescan")
}

// BenchmarkScrape64Agents: one scrape of 64 agents through the real
// gRPC path (the plugin's sync pass, snapshot, batch encoding and gRPC
// send, and the test's receiving side standing in for the host's);
// cpu-ns is the whole process's CPU per scrape, so it bounds the plugin's
// share from above.
func BenchmarkScrape64Agents(b *testing.B) {
	dir, ws := benchRings(b)
	var seq uint64
	writeInterval(ws, &seq)
	c := sdktest.Client(b, newPlugin(), sdktest.Options{Config: map[string]any{"telemetry_dirs": []any{dir}, "hostname": "node"}})
	if res := sdktest.Collect(b, c, 0); len(res.Batches) == 0 || len(res.Errors) != 0 {
		b.Fatalf("first scrape: %d batches, errors %v", len(res.Batches), res.Errors)
	}
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sdktest.Collect(b, c, 0)
	}
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds()), "cpu-ns/scrape")
}

// BenchmarkIdleDrainer: the running plugin, one second per iteration,
// against the same second of the test process without it: the extra CPU
// per second and the extra voluntary context switches (the drain loop's
// timer wake-ups, with the Go scheduler's hand-offs) per second. With 64
// idle rings the loop wakes every drain_interval; with none (a host
// without NIXL agents) only every rescan_interval.
func BenchmarkIdleDrainer(b *testing.B) {
	b.Run("64-rings", func(b *testing.B) {
		dir, _ := benchRings(b)
		benchIdle(b, dir)
	})
	b.Run("no-rings", func(b *testing.B) { benchIdle(b, b.TempDir()) })
}

func benchIdle(b *testing.B, dir string) {
	idle := func(n int) (cpu time.Duration, switches int64) {
		var ru0, ru1 unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru0)
		for i := 0; i < n; i++ {
			time.Sleep(time.Second)
		}
		unix.Getrusage(unix.RUSAGE_SELF, &ru1)
		return time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()), ru1.Nvcsw - ru0.Nvcsw
	}
	b.ResetTimer()
	baseCPU, baseSw := idle(b.N)
	p := newPlugin()
	cfg := sdktest.Config(b, map[string]any{"telemetry_dirs": []any{dir}}, sdk.Paths{})
	if err := p.Configure(context.Background(), cfg); err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	time.Sleep(200 * time.Millisecond)
	cpu, sw := idle(b.N)
	b.StopTimer()
	secs := float64(b.N)
	extra := float64((cpu - baseCPU).Nanoseconds()) / secs
	b.ReportMetric(extra/1e6, "cpu-ms/s")
	b.ReportMetric(extra/1e9*100, "core-%")
	b.ReportMetric(float64(sw-baseSw)/secs, "wakeups/s")
	b.ReportMetric(float64(sw)/secs, "total-wakeups/s")
}

package main

import (
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// A soft-lockup report as this kernel prints it (kernel/watchdog.c,
// pr_emerg with the "watchdog: " prefix), and the lines that follow it.
const (
	report       = "0,1841,93718312,-;watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [kworker/3:1:117]\n"
	reportBefore = "3,412,5001232,-;BUG: soft lockup - CPU#0 stuck for 67s! [java:2211]\n" // before 4.13: KERN_ERR, no prefix
	modules      = "4,1842,93718330,c;Modules linked in: virtio_net virtio_blk\n"
	dictionary   = " SUBSYSTEM=cpu\n DEVICE=+cpu:3\n"
)

// step is one Read of a scriptedLog: data, then err.
type step struct {
	data string
	err  error
}

// scriptedLog is a kernel log that returns its steps one per Read, then
// blocks until closed, like a quiet /dev/kmsg.
type scriptedLog struct {
	mu     sync.Mutex
	steps  []step
	reads  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func newScriptedLog(steps ...step) *scriptedLog {
	return &scriptedLog{steps: steps, closed: make(chan struct{})}
}

func (l *scriptedLog) Read(b []byte) (int, error) {
	l.reads.Add(1)
	l.mu.Lock()
	if len(l.steps) > 0 {
		s := l.steps[0]
		l.steps = l.steps[1:]
		l.mu.Unlock()
		return copy(b, s.data), s.err
	}
	l.mu.Unlock()
	<-l.closed
	return 0, os.ErrClosed
}

func (l *scriptedLog) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// drained reports whether every step has been read.
func (l *scriptedLog) drained() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.steps) == 0
}

type nopWarner struct{}

func (nopWarner) Warn(string, ...any) {}

// tail runs a tailer over the steps until they are drained and returns it
// with its failure count.
func tail(t *testing.T, kernelOnly bool, steps ...step) (*kmsgTailer, *atomic.Int64) {
	t.Helper()
	log := newScriptedLog(steps...)
	var failures atomic.Int64
	tl := newKmsgTailer("/dev/kmsg", log, kernelOnly, nopWarner{}, func() { failures.Add(1) })
	tl.backoff = time.Millisecond
	tl.start()
	t.Cleanup(tl.stop)
	waitFor(t, log.drained)
	// The last step has been handed out; one more Read (the blocking one)
	// means it has been consumed.
	n := int64(len(steps))
	waitFor(t, func() bool { return log.reads.Load() > n })
	return tl, &failures
}

func TestTailerCountsReports(t *testing.T) {
	for _, tc := range []struct {
		name       string
		steps      []step
		kernelOnly bool
		lockups    uint64
		failures   int64
	}{
		{"one report per read, as /dev/kmsg returns them", []step{{data: report}, {data: modules}, {data: report}}, true, 2, 0},
		{"before 4.13: no watchdog prefix", []step{{data: reportBefore}}, true, 1, 0},
		{"a record with its dictionary", []step{{data: strings.TrimSuffix(report, "\n") + "\n" + dictionary}}, true, 1, 0},
		{"several records in one read", []step{{data: modules + report + reportBefore + modules}}, true, 2, 0},
		{"a record split over three reads", []step{{data: report[:10]}, {data: report[10:60]}, {data: report[60:]}}, true, 1, 0},
		{"split at the newline", []step{{data: strings.TrimSuffix(report, "\n")}, {data: "\n" + report}}, true, 2, 0},
		// The kernel stamps what userspace writes with a user facility
		// (prefix 8-15 and up): not counted, unless the filter is off.
		{"written by userspace", []step{{data: "12,1900,94000000,-;watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [plexporter-test:0]\n"}}, true, 0, 0},
		{"written by userspace, filter off", []step{{data: "12,1900,94000000,-;watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [plexporter-test:0]\n"}}, false, 1, 0},
		// Look-alikes that are not the watchdog's soft-lockup report.
		{"hard lockup", []step{{data: "0,17,5000,-;watchdog: Watchdog detected hard LOCKUP on cpu 3\n"}}, true, 0, 0},
		{"rcu stall", []step{{data: "3,18,5001,-;rcu: INFO: rcu_sched self-detected stall on CPU\n"}}, true, 0, 0},
		{"mentioned mid-message", []step{{data: "6,19,5002,-;test: no BUG: soft lockup - CPU#0 stuck for 1s! [x:1]\n"}}, true, 0, 0},
		{"not a record", []step{{data: "garbage without a header\n"}}, true, 0, 0},
		// EPIPE: records were overwritten before they were read; counted,
		// and the tailer goes on.
		{"overflow", []step{{err: syscall.EPIPE}, {data: report}}, true, 1, 1},
		{"overflow drops a partial record", []step{{data: report[:30]}, {err: syscall.EPIPE}, {data: report}}, true, 1, 1},
		// A read error other than EPIPE: counted, retried.
		{"read error", []step{{err: syscall.EIO}, {data: report}}, true, 1, 1},
		// More than kmsgMaxPending without a newline: dropped, counted.
		{"runaway record", []step{{data: strings.Repeat("x", kmsgReadSize)}, {data: strings.Repeat("x", kmsgReadSize)}, {data: strings.Repeat("x", kmsgReadSize)}, {data: "\n" + report}}, true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, failures := tail(t, tc.kernelOnly, tc.steps...)
			if got := tl.lockups.Load(); got != tc.lockups {
				t.Errorf("lockups = %d, want %d", got, tc.lockups)
			}
			if got := failures.Load(); got != tc.failures {
				t.Errorf("failures = %d, want %d", got, tc.failures)
			}
		})
	}
}

// TestTailerReportsEachFailureOnce: the latest failure is handed to one
// scrape, then nothing until the next failure.
func TestTailerReportsEachFailureOnce(t *testing.T) {
	tl, failures := tail(t, true, step{err: syscall.EPIPE}, step{err: syscall.EPIPE})
	if failures.Load() != 2 {
		t.Fatalf("failures = %d, want 2", failures.Load())
	}
	err := tl.unreported()
	if err == nil || !strings.Contains(err.Error(), "/dev/kmsg: records lost: the ring buffer wrapped") {
		t.Errorf("unreported = %v", err)
	}
	if err := tl.unreported(); err != nil {
		t.Errorf("second unreported = %v, want nil", err)
	}
}

// TestTailerStops: stop wakes a read blocked on a quiet log and waits for
// the goroutine.
func TestTailerStops(t *testing.T) {
	log := newScriptedLog()
	tl := newKmsgTailer("/dev/kmsg", log, true, nopWarner{}, func() {})
	tl.start()
	waitFor(t, func() bool { return log.reads.Load() == 1 })
	done := make(chan struct{})
	go func() { tl.stop(); tl.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitDeadline):
		t.Fatal("stop did not return")
	}
}

// TestPluginKmsg: the counter and the failures as a scrape shows them.
func TestPluginKmsg(t *testing.T) {
	log := newScriptedLog(step{data: report}, step{err: syscall.EPIPE}, step{data: report})
	p := fixturePlugin(t, &fakeStatfs{})
	p.openKmsg = func(string) (io.ReadCloser, error) { return log, nil }
	c := sdktest.Client(t, p, fixtureOptions(t, "vm", nil))
	waitFor(t, func() bool { return log.drained() && log.reads.Load() > 3 })

	res := sdktest.Collect(t, c, 0)
	text := res.Text(t)
	mustContain(t, text, "kernel_soft_lockups_total 2", `guest_collection_errors_total{collector="kmsg"} 1`)
	if errs := errorsOf(res, collectorKmsg); len(errs) != 1 || !strings.Contains(errs[0], "records lost") {
		t.Errorf("kmsg errors %q, want the overflow once", errs)
	}
	res = sdktest.Collect(t, c, 0)
	if errs := errorsOf(res, collectorKmsg); len(errs) != 0 {
		t.Errorf("second scrape: kmsg errors %q, want none", errs)
	}
	mustContain(t, res.Text(t), `guest_collection_errors_total{collector="kmsg"} 1`)
}

// TestPluginKmsgDenied: without the privilege (no CAP_SYSLOG under
// dmesg_restrict=1, systemd's ProtectKernelLogs) the plugin runs: one
// warning, the refusal counted but not a partial error (the operator's
// choice not to grant kernel-log access), no lockup counter. Any other
// failure to open (no /dev/kmsg in a container) is one partial error.
func TestPluginKmsgDenied(t *testing.T) {
	for _, tc := range []struct {
		name    string
		errno   syscall.Errno
		partial string
	}{
		{"not permitted", syscall.EPERM, ""},
		{"access denied", syscall.EACCES, ""},
		{"no device", syscall.ENOENT, "open /dev/kmsg: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fixturePlugin(t, &fakeStatfs{})
			p.openKmsg = func(path string) (io.ReadCloser, error) {
				return nil, &os.PathError{Op: "open", Path: path, Err: tc.errno}
			}
			c := sdktest.Client(t, p, fixtureOptions(t, "vm", nil))
			res := sdktest.Collect(t, c, 0)
			errs := errorsOf(res, collectorKmsg)
			switch {
			case tc.partial == "" && len(errs) != 0:
				t.Errorf("kmsg partial errors %q for a refused open, want none", errs)
			case tc.partial != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.partial)):
				t.Errorf("kmsg partial errors %q, want one with %q", errs, tc.partial)
			}
			text := res.Text(t)
			sdktest.Lacks(t, text, "kernel_soft_lockups_total")
			mustContain(t, text, `guest_collection_errors_total{collector="kmsg"} 1`)
			res = sdktest.Collect(t, c, 0)
			if errs := errorsOf(res, collectorKmsg); len(errs) != 0 {
				t.Errorf("second scrape: kmsg errors %q, want none", errs)
			}
			mustContain(t, res.Text(t), `guest_collection_errors_total{collector="kmsg"} 1`)
		})
	}
}

// TestReconfigureKeepsTailer: a second Configure on the same device keeps
// the tailer and its count; kmsg: false stops it.
func TestReconfigureKeepsTailer(t *testing.T) {
	opened := 0
	p := fixturePlugin(t, &fakeStatfs{})
	var log *scriptedLog
	p.openKmsg = func(string) (io.ReadCloser, error) {
		opened++
		log = newScriptedLog(step{data: report})
		return log, nil
	}
	if err := sdktest.Configure(t, p, nil, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return log.drained() && log.reads.Load() > 1 })
	if err := sdktest.Configure(t, p, map[string]any{"statfs_timeout": "2s"}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if opened != 1 || p.tailer == nil || p.tailer.lockups.Load() != 1 {
		t.Errorf("after a second Configure: opened %d times, tailer %v", opened, p.tailer)
	}
	if err := sdktest.Configure(t, p, map[string]any{"kmsg": false}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if p.tailer != nil {
		t.Error("kmsg: false left the tailer running")
	}
	select {
	case <-log.closed:
	default:
		t.Error("kmsg: false did not close the log")
	}
}

// FuzzTailerSplit: however a stream of records is split over reads, the
// tailer counts what it counts on the whole stream, and never panics.
func FuzzTailerSplit(f *testing.F) {
	f.Add(report+modules+reportBefore, 10)
	f.Add(strings.TrimSuffix(report, "\n")+"\n"+dictionary+report, 57)
	f.Add("12,1,2,-;watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [x:1]\n"+report, 0)
	f.Add(";\n,;\n\n \n", 3)
	f.Fuzz(func(t *testing.T, stream string, cut int) {
		if len(stream) > kmsgMaxPending {
			return // a record that long is dropped, by design
		}
		count := func(chunks ...string) uint64 {
			tl := newKmsgTailer("/dev/kmsg", nil, true, nopWarner{}, func() {})
			for _, c := range chunks {
				tl.consume([]byte(c))
			}
			return tl.lockups.Load()
		}
		if cut < 0 {
			cut = -cut
		}
		if len(stream) > 0 {
			cut %= len(stream) + 1
		} else {
			cut = 0
		}
		whole, split := count(stream), count(stream[:cut], stream[cut:])
		if whole != split {
			t.Errorf("%d lockups in the whole stream, %d split at %d: %q", whole, split, cut, stream)
		}
		if n := uint64(strings.Count(stream, "BUG: soft lockup")); whole > n {
			t.Errorf("%d lockups counted from %d reports", whole, n)
		}
	})
}

package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// testReport is the synthetic report the root tests write to the real
// /dev/kmsg. The kernel's own is "<0>watchdog: BUG: soft lockup - CPU#N
// stuck for Ns! [comm:pid]" (pr_emerg, kernel facility); this one has the
// same message, so the tailer's pattern is exercised as it is, but is
// recognisable as a test in the log: priority 12 (user facility, warning,
// so it is not printed on the console as an emergency) and the task
// "plexporter-guest-test". The kernel keeps the user facility of what
// userspace writes, which is why the production tailer (kernelOnly) does
// not count it.
const testReport = "<12>watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [plexporter-guest-test:%d]\n"

func writeKmsg(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, testReport, os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func needKmsg(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("writing to /dev/kmsg needs root (CI runs as root)")
	}
	f, err := os.Open("/dev/kmsg")
	if err != nil {
		t.Skipf("no readable /dev/kmsg: %v", err)
	}
	f.Close()
}

// countingLog counts the reads of the kernel log, to tell a blocked read
// from polling and to know that a record has been consumed.
type countingLog struct {
	io.ReadCloser
	reads atomic.Int64
}

func (c *countingLog) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.ReadCloser.Read(b)
}

// realKmsgPlugin is a plugin on the real /dev/kmsg whose log reads are
// counted; kernelOnly as production has it unless the test turns it off.
func realKmsgPlugin(t *testing.T, kernelOnly bool) (*plugin, *countingLog) {
	p := newPlugin()
	p.kernelOnly = kernelOnly
	log := &countingLog{}
	p.openKmsg = func(path string) (io.ReadCloser, error) {
		r, err := openKmsg(path)
		if err != nil {
			return nil, err
		}
		log.ReadCloser = r
		return log, nil
	}
	t.Cleanup(func() { p.Close() })
	return p, log
}

func lockups(t *testing.T, p *plugin) uint64 {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tailer == nil {
		t.Fatal("no tailer")
	}
	return p.tailer.lockups.Load()
}

var realOptions = sdktest.Options{Procfs: "/proc", Sysfs: "/sys", Rootfs: "/"}

// TestRealKmsgCountsAndRestartDoesNotRecount writes a synthetic watchdog
// report to /dev/kmsg and sees the counter move by exactly 1; a new plugin
// instance (a restart) starts at 0 although the report is still in the
// ring buffer, and counts only what is logged after it started.
func TestRealKmsgCountsAndRestartDoesNotRecount(t *testing.T) {
	needKmsg(t)
	first, _ := realKmsgPlugin(t, false)
	c := sdktest.Client(t, first, realOptions)
	mustContain(t, sdktest.Collect(t, c, 0).Text(t), "kernel_soft_lockups_total 0")

	writeKmsg(t)
	waitFor(t, func() bool { return lockups(t, first) >= 1 })
	time.Sleep(200 * time.Millisecond) // a second count would have come by now
	res := sdktest.Collect(t, c, 0)
	mustContain(t, res.Text(t), "kernel_soft_lockups_total 1")
	if errs := errorsOf(res, collectorKmsg); len(errs) != 0 {
		t.Errorf("kmsg errors: %q", errs)
	}
	first.Close()

	// The restart: the report above is in the ring buffer, not counted.
	second, log := realKmsgPlugin(t, false)
	c = sdktest.Client(t, second, realOptions)
	waitFor(t, func() bool { return log.reads.Load() >= 1 })
	time.Sleep(200 * time.Millisecond)
	mustContain(t, sdktest.Collect(t, c, 0).Text(t), "kernel_soft_lockups_total 0")

	// Production's filter, on the same log: a line userspace wrote is not
	// a lockup, while the test instance counts it.
	production, prodLog := realKmsgPlugin(t, true)
	sdktest.Client(t, production, realOptions)
	waitFor(t, func() bool { return prodLog.reads.Load() >= 1 })
	readsBefore := prodLog.reads.Load()
	writeKmsg(t)
	waitFor(t, func() bool { return lockups(t, second) == 1 && prodLog.reads.Load() > readsBefore })
	if n := lockups(t, production); n != 0 {
		t.Errorf("the production tailer counted %d userspace-written reports, want 0", n)
	}
	mustContain(t, sdktest.Collect(t, c, 0).Text(t), "kernel_soft_lockups_total 1")
}

// TestRealKmsgIdle: while the log is quiet the tailer blocks in one read:
// it costs no CPU and does not poll. The window is 2 s, or
// PLEXPORTER_GUEST_IDLE_SECONDS (60 for the measurement in README.md). The
// process's CPU time covers the test's own goroutines too, so the bound is
// an upper bound for the tailer.
func TestRealKmsgIdle(t *testing.T) {
	needKmsg(t)
	window := 2 * time.Second
	if s := os.Getenv("PLEXPORTER_GUEST_IDLE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("PLEXPORTER_GUEST_IDLE_SECONDS: %v", err)
		}
		window = time.Duration(n) * time.Second
	}
	p, log := realKmsgPlugin(t, true)
	if err := sdktest.Configure(t, p, nil, sdk.Paths{Procfs: "/proc", Sysfs: "/sys", Rootfs: "/"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return log.reads.Load() >= 1 })
	// A second reader, from the same point, counts the records the kernel
	// logged meanwhile (other tests' network namespaces and devices log):
	// a blocking tailer reads once per record.
	// Raw system calls: an os.File would park a non-blocking read in the
	// runtime's poller instead of returning EAGAIN.
	witness, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(witness)
	if _, err := syscall.Seek(witness, 0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	reads0, cpu0 := log.reads.Load(), cpuTime()
	time.Sleep(window)
	cpu, reads := cpuTime()-cpu0, log.reads.Load()-reads0
	records := 0
	for buf := make([]byte, kmsgReadSize); ; records++ {
		if _, err := syscall.Read(witness, buf); err != nil {
			break // EAGAIN: nothing more (EPIPE: so many that some wrapped)
		}
	}
	t.Logf("idle for %s: %s of CPU (user+system, whole test process), %d reads of /dev/kmsg for the %d records the kernel logged", window, cpu, reads, records)
	if limit := window / 200; cpu > limit { // 0.5%
		t.Errorf("%s of CPU while idle for %s, want at most %s", cpu, window, limit)
	}
	if reads > int64(records)+2 {
		t.Errorf("%d reads of /dev/kmsg in %s for %d records: the tailer polls", reads, window, records)
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// softLockupReport matches the message of the kernel watchdog's soft-lockup
// report, kernel/watchdog.c:
//
//	pr_emerg("BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]\n", ...)
//
// with the "watchdog: " pr_fmt prefix since 4.13 and without it before.
// The report's continuation lines (modules, registers, the stack) do not
// match, so each report counts once.
var softLockupReport = regexp.MustCompile(`^(?:watchdog: )?BUG: soft lockup - CPU#[0-9]+ stuck for [0-9]+s! \[`)

const (
	// kmsgReadSize holds any record: /dev/kmsg returns one record per
	// read, at most CONSOLE_EXT_LOG_MAX (8 KiB) with its dictionary, and
	// fails a read into a smaller buffer with EINVAL.
	kmsgReadSize = 8 << 10
	// kmsgMaxPending bounds a record split over reads (a reader that is
	// not /dev/kmsg: a pipe, a file): longer without a newline, the bytes
	// are dropped and counted.
	kmsgMaxPending = 16 << 10
	// kmsgErrorBackoff paces the tailer after a read error other than an
	// overflow, so a persistent one costs a read a second, not a spin.
	kmsgErrorBackoff = time.Second
	// facilityKernel is the syslog facility of records the kernel wrote;
	// /dev/kmsg gives whatever userspace writes to it LOG_USER or another
	// non-zero facility, so the two can be told apart.
	facilityKernel = 0
)

// openKmsg opens the kernel log and moves past the records it already
// holds, so that only reports logged from now on are counted: replaying the
// ring buffer after a restart would count old lockups again (a counter that
// resets and jumps is a phantom rate() spike). The file is pollable, so a
// quiet log parks the tailer in the runtime's poller: no thread, no CPU.
func openKmsg(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek to the end of %s: %w", path, err)
	}
	return f, nil
}

// kmsgTailer counts the soft-lockup reports in the kernel log, from a
// goroutine that blocks on read while the log is quiet.
type kmsgTailer struct {
	path       string
	r          io.ReadCloser
	kernelOnly bool // count only records of the kernel facility
	log        warner
	failed     func() // called once per counted failure, for the error counter
	backoff    time.Duration

	lockups atomic.Uint64

	mu          sync.Mutex
	lastErr     error
	errSeq      uint64 // failures so far
	reportedSeq uint64 // failures already reported as partial errors

	pending  []byte // the start of a record whose end has not been read
	stopOnce sync.Once
	quit     chan struct{} // closed by stop
	done     chan struct{} // closed when run has returned
}

func newKmsgTailer(path string, r io.ReadCloser, kernelOnly bool, log warner, failed func()) *kmsgTailer {
	return &kmsgTailer{
		path: path, r: r, kernelOnly: kernelOnly, log: log, failed: failed, backoff: kmsgErrorBackoff,
		quit: make(chan struct{}), done: make(chan struct{}),
	}
}

func (t *kmsgTailer) start() { go t.run() }

// stop closes the log, which wakes the blocked read, and waits for the
// goroutine. Safe to call more than once.
func (t *kmsgTailer) stop() {
	t.stopOnce.Do(func() {
		close(t.quit)
		t.r.Close()
	})
	<-t.done
}

func (t *kmsgTailer) run() {
	defer close(t.done)
	buf := make([]byte, kmsgReadSize)
	for {
		n, err := t.r.Read(buf)
		if n > 0 {
			t.consume(buf[:n])
		}
		switch {
		case err == nil:
		case t.stopping():
			return
		case errors.Is(err, syscall.EPIPE):
			// The kernel overwrote records we had not read yet; the next
			// read returns the oldest one still there. A lockup among the
			// lost ones is not counted, so the loss is.
			t.fail(fmt.Errorf("%s: records lost: the ring buffer wrapped before they were read", t.path))
			t.pending = t.pending[:0]
		case errors.Is(err, io.EOF):
			// Not /dev/kmsg, which blocks instead: a file or a closed pipe
			// has nothing more to give.
			t.log.Warn("kernel log ended; soft lockups are no longer counted", "path", t.path)
			return
		default:
			t.fail(fmt.Errorf("read %s: %w", t.path, err))
			select {
			case <-time.After(t.backoff):
			case <-t.quit:
				return
			}
		}
	}
}

func (t *kmsgTailer) stopping() bool {
	select {
	case <-t.quit:
		return true
	default:
		return false
	}
}

// consume splits what a read returned into records. From /dev/kmsg that is
// exactly one record; any other reader may split a record over reads or
// return several at once.
func (t *kmsgTailer) consume(b []byte) {
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			if len(t.pending)+len(b) > kmsgMaxPending {
				t.fail(fmt.Errorf("%s: a record of more than %d bytes without a newline; dropped", t.path, kmsgMaxPending))
				t.pending = t.pending[:0]
				return
			}
			t.pending = append(t.pending, b...)
			return
		}
		line := b[:nl]
		if len(t.pending) > 0 {
			t.pending = append(t.pending, line...)
			line = t.pending
		}
		t.record(line)
		t.pending = t.pending[:0]
		b = b[nl+1:]
	}
}

// record counts one line of the log if it is a soft-lockup report. A record
// is "<prefix>,<seq>,<usec>,<flags>[,...];<message>", the prefix being
// facility<<3 | level; lines that start with a space are the record's
// dictionary (SUBSYSTEM=..., DEVICE=...).
func (t *kmsgTailer) record(line []byte) {
	if len(line) == 0 || line[0] == ' ' {
		return
	}
	header, msg, ok := bytes.Cut(line, []byte{';'})
	if !ok {
		return
	}
	if t.kernelOnly {
		prefix, _, _ := bytes.Cut(header, []byte{','})
		v, err := strconv.Atoi(string(prefix))
		if err != nil || v>>3 != facilityKernel {
			return
		}
	}
	if softLockupReport.Match(msg) {
		t.lockups.Add(1)
	}
}

// fail counts a failure and keeps it for the next scrape.
func (t *kmsgTailer) fail(err error) {
	t.failed()
	t.mu.Lock()
	first := t.errSeq == 0 || t.lastErr.Error() != err.Error()
	t.lastErr = err
	t.errSeq++
	t.mu.Unlock()
	if first {
		t.log.Warn("kernel log", "error", err)
	}
}

// unreported returns the latest failure if it happened after the previous
// call, so each burst of failures becomes one partial error.
func (t *kmsgTailer) unreported() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reportedSeq == t.errSeq {
		return nil
	}
	t.reportedSeq = t.errSeq
	return t.lastErr
}

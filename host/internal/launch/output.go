package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stdoutLineLimit is the longest stdout line passed on to go-plugin, which
// reads stdout with a bufio.Scanner: a line over its 64 KiB ends the
// scanner, nobody reads the pipe any more, and the plugin's next write to
// stdout (a library's printf) blocks, its collect with it. Only the
// handshake line matters to the host; longer lines are cut here.
const stdoutLineLimit = 16 << 10

// stdoutReadRate bounds the bytes a second the host reads from a plugin's
// stdout (after a burst of as many): a C library's printf flooding fd 1
// is then slowed by its own blocked writes instead of costing the host a
// read loop at pipe speed.
const stdoutReadRate = 1 << 20

// boundStdout returns the plugin's stdout with every line cut to
// stdoutLineLimit bytes (the rest of the line is dropped and the line
// counted in truncated), and keeps draining the pipe to its end whatever
// the reader does, so that no write of the plugin ever blocks on it.
// first is called once, at the first line cut.
func boundStdout(r io.ReadCloser, truncated *atomic.Int64, first func()) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer r.Close()
		br := bufio.NewReaderSize(&throttle{r: r, b: newBucket(stdoutReadRate, stdoutReadRate, time.Now())}, stdoutLineLimit)
		cutting := false
		for {
			line, isPrefix, err := br.ReadLine()
			if err != nil {
				if errors.Is(err, os.ErrClosed) {
					err = io.EOF // cmd.Wait closed the pipe: the plugin is gone
				}
				pw.CloseWithError(err)
				return
			}
			if !cutting {
				if isPrefix && truncated.Add(1) == 1 && first != nil {
					first()
				}
				if _, err := pw.Write(append(line, '\n')); err != nil {
					_, _ = io.Copy(io.Discard, br) // nobody reads: drain, never block the plugin
					return
				}
			}
			cutting = isPrefix
		}
	}()
	return pr
}

// crashNote keeps the first lines of a plugin's stderr that say why it
// crashed, for the "plugin exited" error: the Go runtime's "panic: ...",
// "fatal error: ...", "SIGSEGV: segmentation violation" and "[signal ...]"
// lines, which go-plugin logs as plain text at DEBUG only.
type crashNote struct {
	mu     sync.Mutex
	reason []string
	done   chan struct{} // closed at the end of stderr
}

func newCrashNote() *crashNote { return &crashNote{done: make(chan struct{})} }

// maxReasonBytes bounds the reason a plugin's stderr can put into the log
// line and LAST ERROR.
const maxReasonBytes = 512

// see looks at one plain-text stderr line.
func (c *crashNote) see(line []byte) {
	if c == nil || len(line) == 0 || line[0] == '{' {
		return
	}
	s := strings.TrimSpace(string(line))
	crash := strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ") ||
		(strings.HasPrefix(s, "SIG") && strings.Contains(s, ": ") && !strings.Contains(s[:strings.Index(s, ": ")], " "))
	signal := strings.HasPrefix(s, "[signal ")
	if !crash && !signal {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reason) >= 2 || (crash && len(c.reason) == 1) {
		return // the first crash line and the signal line after it
	}
	if len(s) > maxReasonBytes {
		s = s[:maxReasonBytes] + "..."
	}
	c.reason = append(c.reason, s)
}

// text is the crash reason seen, "" for none.
func (c *crashNote) text() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.reason, " ")
}

// exitError says how the process ended: its exit status, or the signal
// that killed it by name, and what its stderr said about the crash.
func exitError(err error, note *crashNote) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ee interface{ Sys() any }
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			msg = fmt.Sprintf("killed by %s (%s)", unix.SignalName(ws.Signal()), ws.Signal())
		}
	}
	if reason := note.text(); reason != "" {
		msg += ": " + reason
	}
	return &ExitError{Err: err, Message: msg}
}

// ExitError is a plugin process's end: the exit status or signal and, for
// a crash, the reason its runtime printed.
type ExitError struct {
	Err     error
	Message string
}

func (e *ExitError) Error() string { return e.Message }
func (e *ExitError) Unwrap() error { return e.Err }

// notExecutableBy says why uid cannot execute path, when the file's mode
// is the reason ("" otherwise): the sandbox runs the plugin as another
// user than the root that installed it.
func notExecutableBy(path string, uid, gid int) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	mode := st.Mode & 0o7777
	var bit uint32 = 0o001
	switch {
	case int(st.Uid) == uid:
		bit = 0o100
	case int(st.Gid) == gid:
		bit = 0o010
	}
	if mode&bit != 0 {
		return ""
	}
	who := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		who = fmt.Sprintf("user %s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("permission denied: %s (mode %04o, owner uid %d) is not executable by the sandbox %s that plugins run as; make it executable by others (chmod 0755 %s)", path, mode, st.Uid, who, path)
}

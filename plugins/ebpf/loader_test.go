package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// TestExplainPerfDenied: a denied perf event gets the perf_event_paranoid
// hint, a denied file (the sandbox) and other errors are left as they are.
func TestExplainPerfDenied(t *testing.T) {
	perf := fmt.Errorf("token tcp_set_state: opening perf event: %w", syscall.EACCES)
	if got := explainPerfDenied(perf); !errors.Is(got, syscall.EACCES) || !strings.Contains(got.Error(), "perf_event_paranoid") {
		t.Errorf("denied perf event: %v", got)
	}
	file := fmt.Errorf("reading file: %w", &fs.PathError{Op: "open", Path: "/sys/bus/event_source/devices/kprobe/type", Err: syscall.EACCES})
	if got := explainPerfDenied(file); got != file {
		t.Errorf("denied file: %v, want it unchanged", got)
	}
	other := errors.New("no such symbol")
	if got := explainPerfDenied(other); got != other {
		t.Errorf("other error: %v, want it unchanged", got)
	}
	if explainPerfDenied(nil) != nil {
		t.Error("nil error annotated")
	}
}

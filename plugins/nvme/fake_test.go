package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// fakeDevices stands in for /dev/nvme*: each controller (by base name)
// returns a log page or an error, optionally blocking until released. It
// records how many reads ran concurrently per controller.
type fakeDevices struct {
	mu       sync.Mutex
	pages    map[string][]byte
	openErrs map[string]error
	cmdErrs  map[string]error
	block    chan struct{} // non-nil: GetLogPage waits for a receive or close
	calls    map[string]int
	inflight map[string]int
	maxIn    map[string]int
	opened   map[string]int // currently open handles
	paths    []string
}

func newFake() *fakeDevices {
	return &fakeDevices{
		pages: map[string][]byte{}, openErrs: map[string]error{}, cmdErrs: map[string]error{},
		calls: map[string]int{}, inflight: map[string]int{}, maxIn: map[string]int{}, opened: map[string]int{},
	}
}

func (f *fakeDevices) open(path string) (adminDevice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, path)
	name := filepath.Base(path)
	if err := f.openErrs[name]; err != nil {
		return nil, &pathError{path, err}
	}
	f.opened[name]++
	return &fakeDevice{f: f, name: name}, nil
}

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return "open " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

func (f *fakeDevices) stats(name string) (calls, maxInflight, open int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name], f.maxIn[name], f.opened[name]
}

type fakeDevice struct {
	f    *fakeDevices
	name string
}

func (d *fakeDevice) Close() error {
	d.f.mu.Lock()
	d.f.opened[d.name]--
	d.f.mu.Unlock()
	return nil
}

func (d *fakeDevice) GetLogPage(ctx context.Context, lid uint8, nsid uint32, buf []byte) error {
	f := d.f
	if lid != 0x02 || nsid != 0xFFFFFFFF || len(buf) != 512 {
		return fmt.Errorf("fake: unexpected command lid=%#x nsid=%#x len=%d", lid, nsid, len(buf))
	}
	f.mu.Lock()
	f.calls[d.name]++
	f.inflight[d.name]++
	if f.inflight[d.name] > f.maxIn[d.name] {
		f.maxIn[d.name] = f.inflight[d.name]
	}
	block, page, err := f.block, f.pages[d.name], f.cmdErrs[d.name]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight[d.name]--
		f.mu.Unlock()
	}()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	if page == nil {
		return fmt.Errorf("fake: no page for %s", d.name)
	}
	copy(buf, page)
	return nil
}

// waitDeadline bounds every wait of this package's tests for a condition.
const waitDeadline = 60 * time.Second

// waitFor polls cond until it holds. The deadline only matters when the
// test fails: it is long enough for a loaded CI machine (work that takes
// milliseconds quiet), never a budget the code must meet.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

package main

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fakeLibrary stands in for a loaded shared object, so that the plugin's
// own logic (relay checks, deadlines, the stuck collect) is tested without
// cgo and without a C library that would take the test process down.
type fakeLibrary struct {
	info    collectorInfo
	collect func(r *relay, deadline time.Time) error
}

func (f *fakeLibrary) Path() string                        { return "/fake/lib.so" }
func (f *fakeLibrary) Info() collectorInfo                 { return f.info }
func (f *fakeLibrary) Configure(string) error              { return nil }
func (f *fakeLibrary) Collect(r *relay, d time.Time) error { return f.collect(r, d) }

var fakeInfo = collectorInfo{Name: "fake", Version: "1", Families: []familyInfo{
	{Name: "fake_value", Type: abiGauge, Help: "A value.", Labels: []string{"device"}},
	{Name: "fake_latency_seconds", Type: abiHistogram, Help: "A histogram."},
}}

func fakePlugin(collect func(r *relay, deadline time.Time) error) *plugin {
	p := newPlugin()
	p.open = func(string) (library, error) { return &fakeLibrary{info: fakeInfo, collect: collect}, nil }
	return p
}

func TestRelayRefusesWhatItCannotForm(t *testing.T) {
	p := fakePlugin(func(r *relay, _ time.Time) error {
		r.sample(0, []string{"sda"}, 1)
		r.sample(0, []string{"a", "b"}, 2) // wrong label count
		r.sample(7, nil, 3)                // no such family
		r.sample(1, nil, 4)                // a histogram as a value
		r.error("device 3: unreadable")
		r.error("device 3: unreadable") // once per collect
		return nil
	})
	res := sdktest.Run(t, p, sdktest.Options{Config: map[string]any{"library": "/fake/lib.so"}})
	text := res.Text(t)
	sdktest.Contains(t, text, `fake_value{device="sda"} 1`, `so_collection_errors_total{collector="fake"} 2`)
	var msgs []string
	for _, e := range res.Errors {
		if e.GetCollector() != "fake" {
			t.Errorf("error of collector %q, want fake", e.GetCollector())
		}
		msgs = append(msgs, e.GetMessage())
	}
	want := []string{"device 3: unreadable", "refused 3 samples the collector emitted; the first: family fake_value has 1 label names but a sample has 2 values"}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
}

// A collect that ignores its deadline is given up on before the host's
// deadline, with what it emitted; the process then exits unless it returns.
func TestStuckCollectEndsTheProcess(t *testing.T) {
	release := make(chan struct{})
	var libDeadline atomic.Int64
	p := fakePlugin(func(r *relay, deadline time.Time) error {
		libDeadline.Store(deadline.UnixNano())
		r.sample(0, []string{"sda"}, 1)
		<-release
		if got := r.sample(0, []string{"sdb"}, 2); got != emitStop {
			t.Errorf("an emit after the plugin gave up returned %d, want STOP (%d)", got, emitStop)
		}
		return nil
	})
	exited := make(chan string, 1)
	p.exit = func(msg string) { exited <- msg }
	c := sdktest.Client(t, p, sdktest.Options{Config: map[string]any{"library": "/fake/lib.so"}})

	// 10 s, not 1 s: the plugin keeps a tenth of the deadline (at most
	// 500 ms) and sends in the second half of it; 50 ms of a 1 s deadline
	// was missed once beside stress-ng at load 13.
	const deadline = 10 * time.Second
	start := time.Now()
	res := sdktest.Collect(t, c, deadline)
	took := time.Since(start)
	if status.Code(res.Status) != codes.Aborted {
		t.Fatalf("collect status %v after %v: the plugin should answer before the host's deadline, failing the collect (ABORTED)", res.Status, took)
	}
	// The library's deadline is the collect's, less the reserve for
	// sending: after the start, and before the start plus the 10 s given.
	if d := time.Unix(0, libDeadline.Load()).Sub(start); d <= 0 || d >= deadline {
		t.Errorf("library deadline %v after the start, want ~9.5s", d)
	}
	text := res.Text(t)
	sdktest.Contains(t, text, `fake_value{device="sda"} 1`, `so_collection_errors_total{collector="fake"} 1`)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), "has not returned since its deadline") {
		t.Errorf("errors = %v, want the overrun", res.Errors)
	}
	// While stuck, the next collect answers at once with the same error.
	res = sdktest.Collect(t, c, deadline)
	sdktest.Contains(t, res.Text(t), `so_collection_errors_total{collector="fake"} 2`)
	select {
	case msg := <-exited:
		if !strings.Contains(msg, "/fake/lib.so") {
			t.Errorf("exit message %q does not name the library", msg)
		}
	case <-time.After(waitDeadline):
		t.Fatalf("the process did not exit in %s while the collect stayed stuck (stuckGrace %s)", waitDeadline, stuckGrace)
	}
	close(release)
}

func TestStuckCollectThatReturnsKeepsTheProcess(t *testing.T) {
	release := make(chan struct{})
	calls := 0
	p := fakePlugin(func(r *relay, _ time.Time) error {
		calls++
		if calls == 1 {
			<-release
		}
		r.sample(0, []string{"sda"}, float64(calls))
		return nil
	})
	p.exit = func(msg string) { t.Errorf("exited: %s", msg) }
	c := sdktest.Client(t, p, sdktest.Options{Config: map[string]any{"library": "/fake/lib.so"}})
	sdktest.Collect(t, c, 200*time.Millisecond)
	close(release) // returns within stuckGrace
	// Until the stuck call has returned, a collect answers at once with
	// the overrun and calls nothing; then the library is called again.
	for deadline := time.Now().Add(waitDeadline); ; time.Sleep(10 * time.Millisecond) {
		text := sdktest.Collect(t, c, time.Second).Text(t)
		if strings.Contains(text, `fake_value{device="sda"} 2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the library was not called again in %s after the stuck call returned:\n%s", waitDeadline, text)
		}
	}
	time.Sleep(stuckGrace) // past the grace: p.exit would have been called by now
}

// waitDeadline bounds every wait of this package's tests for a condition:
// it only matters when the test fails.
const waitDeadline = 60 * time.Second

func TestWithoutLibrary(t *testing.T) {
	res := sdktest.Run(t, newPlugin(), sdktest.Options{})
	sdktest.CleanGolden(t, res, "testdata/nolibrary.golden")
}

// A library whose collect fails as a whole (returns non-zero) fails the
// collect: what it emitted is kept, the stream ends ABORTED, so the host
// sets plexporter_plugin_scrape_success to 0. so_collector_info shows the
// library's own version.
func TestFailedCollectFailsTheScrape(t *testing.T) {
	fail := false
	p := fakePlugin(func(r *relay, _ time.Time) error {
		r.sample(0, []string{"sda"}, 1)
		if fail {
			return errors.New("collect returned 5")
		}
		return nil
	})
	c := sdktest.Client(t, p, sdktest.Options{Config: map[string]any{"library": "/fake/lib.so"}})
	res := sdktest.Collect(t, c, waitDeadline)
	if res.Status != nil {
		t.Fatalf("a good collect ended %v", res.Status)
	}
	sdktest.Contains(t, res.Text(t), `so_collector_info{collector="fake",version="1"} 1`)
	fail = true
	res = sdktest.Collect(t, c, waitDeadline)
	if status.Code(res.Status) != codes.Aborted || !strings.Contains(status.Convert(res.Status).Message(), "collect returned 5") {
		t.Fatalf("a failed collect ended %v, want ABORTED with the library's error", res.Status)
	}
	sdktest.Contains(t, res.Text(t), `fake_value{device="sda"} 1`, `so_collection_errors_total{collector="fake"} 1`, `so_collector_info{collector="fake",version="1"} 1`)
}

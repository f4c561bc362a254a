package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// pollerGoroutines counts goroutines running poller code.
func pollerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "nvme.(*poller).") || strings.Contains(g, "main.(*poller).") {
			n++
		}
	}
	return n
}

func waitNoPollerGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for pollerGoroutines() != 0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("poller goroutines leaked:\n%s", buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func configured(t *testing.T, f *fakeDevices, raw map[string]any) (*plugin, string) {
	t.Helper()
	root := sysfsFixture(t, "sysfs")
	p := testPlugin(t, f)
	if err := sdktest.Configure(t, p, raw, sdk.Paths{Sysfs: root}); err != nil {
		t.Fatal(err)
	}
	return p, root
}

func TestOneReadInFlightPerController(t *testing.T) {
	f := fixtureFake(t)
	f.block = make(chan struct{})
	p, _ := configured(t, f, map[string]any{"smart_interval": "1ms"})
	waitFor(t, "reads in flight", func() bool {
		a, _, _ := f.stats("nvme0")
		b, _, _ := f.stats("nvme1")
		return a == 1 && b == 1
	})
	time.Sleep(100 * time.Millisecond) // ~100 ticks while the reads hang
	for _, n := range []string{"nvme0", "nvme1", "nvme2"} {
		if calls, maxIn, _ := f.stats(n); calls != 1 || maxIn != 1 {
			t.Errorf("%s: %d ioctls started, %d at once while one hangs; want 1, 1", n, calls, maxIn)
		}
	}
	close(f.block) // let them finish; later rounds run again
	waitFor(t, "later rounds", func() bool { a, _, _ := f.stats("nvme0"); return a >= 5 })
	p.Close()
	for _, n := range []string{"nvme0", "nvme1", "nvme2"} {
		if _, maxIn, open := f.stats(n); maxIn != 1 || open != 0 {
			t.Errorf("%s: max %d concurrent ioctls, %d handles left open", n, maxIn, open)
		}
	}
	waitNoPollerGoroutines(t)
}

func TestCloseStopsPoller(t *testing.T) {
	f := fixtureFake(t)
	p, _ := configured(t, f, map[string]any{"smart_interval": "1h"})
	waitFor(t, "first round", func() bool { return p.readsDone() >= 3 })
	if pollerGoroutines() == 0 {
		t.Fatal("no poller goroutine while running: the leak check would prove nothing")
	}
	p.Close()
	p.Close() // idempotent
	waitNoPollerGoroutines(t)
}

func TestCloseInterruptsBlockedRead(t *testing.T) {
	f := fixtureFake(t)
	f.block = make(chan struct{}) // never released
	p, _ := configured(t, f, map[string]any{"smart_interval": "1h"})
	waitFor(t, "read in flight", func() bool { a, _, _ := f.stats("nvme0"); return a == 1 })
	pl := p.current()
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitDeadline):
		t.Fatal("Close hangs on a read in flight")
	}
	waitNoPollerGoroutines(t)
	// Cancellation at shutdown is not a device failure.
	if st, _, _ := pl.state("nvme0"); st.LastErr != nil {
		t.Errorf("shutdown recorded as a failed read: %v", st.LastErr)
	}
	if n := p.errs.Count(collectorSMART); n != 0 {
		t.Errorf("shutdown counted as %d errors", n)
	}
}

func TestReconfigureReplacesPoller(t *testing.T) {
	f := fixtureFake(t)
	p, root := configured(t, f, map[string]any{"smart_interval": "1h"})
	waitFor(t, "first round", func() bool { return p.readsDone() >= 3 })
	first := p.current()
	if err := sdktest.Configure(t, p, map[string]any{"smart_interval": "2h"}, sdk.Paths{Sysfs: root}); err != nil {
		t.Fatal(err)
	}
	if p.current() == first || p.current().interval != 2*time.Hour {
		t.Fatal("poller not replaced")
	}
	select {
	case <-first.done():
	default:
		t.Fatal("previous poller still running")
	}
	p.Close()
	waitNoPollerGoroutines(t)
}

func TestEachFailedReadReportedOnce(t *testing.T) {
	f := fixtureFake(t)
	p, root := configured(t, f, map[string]any{"smart_interval": "1h"})
	waitFor(t, "first round", func() bool { return p.readsDone() >= 3 })
	c := sdktest.Client(t, &configuredPlugin{p}, sdktest.Options{Sysfs: root})
	smartErrs := func(res *sdktest.Result) (n int) {
		for _, e := range res.Errors {
			if e.Collector == "smart" {
				n++
			}
		}
		return n
	}
	if n := smartErrs(sdktest.Collect(t, c, 0)); n != 1 {
		t.Fatalf("first scrape: %d smart errors, want 1", n)
	}
	if n := smartErrs(sdktest.Collect(t, c, 0)); n != 0 {
		t.Fatalf("second scrape repeated the error (%d)", n)
	}
	// Another failed read (next round) is a new error.
	p.current().round(context.Background())
	waitFor(t, "second round", func() bool { return p.readsDone() >= 6 })
	res := sdktest.Collect(t, c, 0)
	if n := smartErrs(res); n != 1 {
		t.Fatalf("after a new failure: %d smart errors, want 1", n)
	}
	if !strings.Contains(res.Text(t), `nvme_collection_errors_total{collector="smart"} 2`) { // nvme2's two failed reads
		t.Errorf("collection errors not counted:\n%s", res.Text(t))
	}
	// Recovery: the device answers again.
	f.mu.Lock()
	delete(f.cmdErrs, "nvme2")
	f.pages["nvme2"] = readBin(t, "healthy.bin")
	f.mu.Unlock()
	p.current().round(context.Background())
	waitFor(t, "third round", func() bool { return p.readsDone() >= 9 })
	text := sdktest.Collect(t, c, 0).Text(t)
	for _, want := range []string{`nvme_smart_available{device="nvme2"} 1`, `nvme_power_cycles_total{device="nvme2"} 38`, `nvme_collection_errors_total{collector="smart"} 2`} {
		if !strings.Contains(text, want) {
			t.Errorf("after recovery, missing %s", want)
		}
	}
}

func TestStaleValuesKeptWhenReadFails(t *testing.T) {
	f := fixtureFake(t)
	p, root := configured(t, f, map[string]any{"smart_interval": "1h"})
	waitFor(t, "first round", func() bool { return p.readsDone() >= 3 })
	f.mu.Lock()
	f.cmdErrs["nvme0"] = syscall.ETIMEDOUT
	f.mu.Unlock()
	p.now = func() time.Time { return fixedNow.Add(time.Hour) }
	p.current().now = p.now
	p.current().round(context.Background())
	waitFor(t, "second round", func() bool { return p.readsDone() >= 6 })
	text := sdktest.Collect(t, sdktest.Client(t, &configuredPlugin{p}, sdktest.Options{Sysfs: root}), 0).Text(t)
	for _, want := range []string{
		`nvme_smart_available{device="nvme0"} 0`,
		`nvme_smart_last_success_timestamp_seconds{device="nvme0"} 1.7959536e+09`, // the old read
		`nvme_smart_last_success_timestamp_seconds{device="nvme1"} 1.7959572e+09`, // the new read
		`nvme_power_cycles_total{device="nvme0"} 38`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
}

func TestRemovedControllerForgotten(t *testing.T) {
	f := fixtureFake(t)
	p, root := configured(t, f, map[string]any{"smart_interval": "1h"})
	waitFor(t, "first round", func() bool { return p.readsDone() >= 3 })
	must(t, os.Remove(filepath.Join(root, "class/nvme/nvme1")))
	p.current().round(context.Background())
	waitFor(t, "second round", func() bool { return p.readsDone() >= 5 })
	if _, _, ok := p.current().state("nvme1"); ok {
		t.Error("removed controller still cached")
	}
	if calls, _, _ := f.stats("nvme1"); calls != 1 {
		t.Errorf("removed controller read %d times", calls)
	}
}

// configuredPlugin serves an already configured plugin through sdktest
// without re-running its Configure (which would restart the poller).
type configuredPlugin struct{ *plugin }

func (c *configuredPlugin) Configure(context.Context, sdk.Config) error { return nil }

func (p *plugin) current() *poller {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.poller
}

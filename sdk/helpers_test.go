package sdk_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

var descFailures = sdk.NewDesc("flaky_collection_errors_total", sdk.Counter, "Failures by collector.", "collector")

// flaky fails its "read" collector on every scrape and counts one
// background failure of "poll" per scrape, without reporting it.
type flaky struct{ errs sdk.CollectionErrors }

func (f *flaky) Info() sdk.Info {
	return sdk.Info{Name: "flaky", Version: "1", Metrics: []*sdk.Desc{descFailures}}
}
func (f *flaky) Configure(context.Context, sdk.Config) error { return nil }
func (f *flaky) Collect(_ context.Context, w *sdk.Writer) error {
	defer f.errs.Write(w, descFailures, "read", "poll", "never")
	f.errs.Add("poll", 1)
	f.errs.Fail(w, "read", errors.New("read /sys/x: permission denied"))
	return nil
}

// TestCollectionErrors: Fail reports to the host and counts; Add counts
// only; Write exports every named collector, 0 for one never failed; the
// counter keeps counting across scrapes.
func TestCollectionErrors(t *testing.T) {
	f := &flaky{}
	f.errs.Add("poll", 2) // before the first scrape, as a poller started by Configure may
	c := sdktest.Client(t, f, sdktest.Options{})
	for scrape := 1; scrape <= 2; scrape++ {
		res := sdktest.Collect(t, c, 0)
		if len(res.Errors) != 1 || res.Errors[0].Collector != "read" || res.Errors[0].Message != "read /sys/x: permission denied" {
			t.Fatalf("scrape %d: errors sent to the host = %v, want the one read failure", scrape, res.Errors)
		}
		text := res.Text(t)
		for _, want := range []string{
			`flaky_collection_errors_total{collector="read"} ` + itoa(scrape),
			`flaky_collection_errors_total{collector="poll"} ` + itoa(scrape+2),
			`flaky_collection_errors_total{collector="never"} 0`,
		} {
			if !strings.Contains(text, want+"\n") {
				t.Errorf("scrape %d: no line %q in\n%s", scrape, want, text)
			}
		}
	}
	if got := f.errs.Count("read"); got != 2 {
		t.Errorf("Count(read) = %d, want 2", got)
	}
}

func TestCollectionErrorsConcurrentAdd(t *testing.T) {
	var e sdk.CollectionErrors
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				e.Add("poll", 1)
			}
		}()
	}
	wg.Wait()
	if got := e.Count("poll"); got != 8000 {
		t.Fatalf("Count = %d, want 8000", got)
	}
}

func TestBoolAndUnixSeconds(t *testing.T) {
	if sdk.Bool(true) != 1 || sdk.Bool(false) != 0 {
		t.Fatalf("Bool: %v %v", sdk.Bool(true), sdk.Bool(false))
	}
	if got, want := sdk.UnixSeconds(time.Unix(1000, 250_000_000)), 1000.25; got != want {
		t.Fatalf("UnixSeconds = %v, want %v", got, want)
	}
}

// TestPoller: the first round runs at once, later ones every interval;
// Stop cancels the round in progress, waits for it and no round follows.
func TestPoller(t *testing.T) {
	var rounds atomic.Int64
	blocked := make(chan struct{})
	var returned atomic.Bool
	p := sdk.NewPoller(time.Millisecond, func(ctx context.Context) {
		if rounds.Add(1) == 3 {
			close(blocked)
			<-ctx.Done() // a slow read that honours cancellation
			returned.Store(true)
		}
	})
	go p.Run()
	select {
	case <-blocked:
	case <-time.After(time.Minute):
		t.Fatalf("3 rounds not reached in a minute (%d)", rounds.Load())
	}
	p.Run() // a second Run returns at once
	p.Stop()
	if !returned.Load() {
		t.Fatal("Stop returned before the round in progress")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	p.Stop() // again: no-op
	p.Run()  // after Stop: no round
	if n := rounds.Load(); n != 3 {
		t.Fatalf("%d rounds, want 3 (none after the blocked one)", n)
	}
}

// TestPollerStopBeforeRun: a Run that begins after Stop runs no round.
func TestPollerStopBeforeRun(t *testing.T) {
	var rounds atomic.Int64
	p := sdk.NewPoller(time.Hour, func(context.Context) { rounds.Add(1) })
	p.Stop()
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed by a Stop before Run")
	}
	p.Run()
	p.Stop() // again: no-op
	if n := rounds.Load(); n != 0 {
		t.Fatalf("%d rounds after Stop", n)
	}
}

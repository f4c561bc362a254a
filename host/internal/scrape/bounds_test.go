package scrape

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// A plugin that names a new collector in every partial error gets at most
// maxCollectors counter series; the rest are counted, under one series.
func TestCollectorLabelsAreBounded(t *testing.T) {
	c := newCounters()
	for i := range 1000 {
		c.addErrors("hostile", []*pluginv1.CollectError{{Collector: fmt.Sprint("c", i), Message: "x"}}, 0)
	}
	c.addErrors("good", []*pluginv1.CollectError{{Collector: "sysfs"}}, 0)
	_, errs, _ := c.addDrops(&guard.Result{})
	if n := c.collectors("hostile"); n != maxCollectors+1 {
		t.Errorf("hostile plugin has %d collector series, want %d and the overflow", n, maxCollectors)
	}
	if got := errs[[2]string{"hostile", OverflowCollector}]; got != 1000-maxCollectors {
		t.Errorf("overflow counted %v errors, want %d", got, 1000-maxCollectors)
	}
	if errs[[2]string{"good", "sysfs"}] != 1 {
		t.Error("another plugin's collector was not counted")
	}
	var total float64
	for k, v := range errs {
		if k[0] == "hostile" {
			total += v
		}
	}
	if total != 1000 {
		t.Errorf("%v of 1000 errors counted", total)
	}
}

// Error messages invented on every scrape do not grow the log-once set
// without bound, in entries or in bytes (it keeps hashes: a 4 KiB message
// costs what a short one does), and at most maxErrorLines of them are
// logged per plugin and scrape.
func TestLoggedCausesAreBounded(t *testing.T) {
	var logs bytes.Buffer
	s := &Scraper{logged: map[uint64]struct{}{}, seed: maphash.MakeSeed(), log: slog.New(slog.NewTextHandler(&logs, nil))}
	long := strings.Repeat("m", 4<<10)
	for i := range 3 * maxLogged / 20 {
		var errs []*pluginv1.CollectError
		for j := range 20 {
			errs = append(errs, &pluginv1.CollectError{Collector: "c", Message: fmt.Sprint(long, i, " ", j)})
		}
		s.logOnce([]string{"hostile"}, []*supervise.Collection{{Errors: errs}}, &guard.Result{})
		if len(s.logged) > maxLogged {
			t.Fatalf("%d causes remembered after %d scrapes, want at most %d", len(s.logged), i+1, maxLogged)
		}
		if i == 0 {
			if n := strings.Count(logs.String(), "partial error (logged once)"); n != maxErrorLines {
				t.Fatalf("%d errors logged of one scrape's 20, want %d", n, maxErrorLines)
			}
		}
	}
}

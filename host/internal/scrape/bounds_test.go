package scrape

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/merge"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// A plugin that names a new collector in every partial error gets at most
// maxCollectors counter series; the rest are counted, under one series.
func TestCollectorLabelsAreBounded(t *testing.T) {
	c := newCounters()
	for i := range 1000 {
		c.addErrors("hostile", []*pluginv1.CollectError{{Collector: fmt.Sprint("c", i), Message: "x"}})
	}
	c.addErrors("good", []*pluginv1.CollectError{{Collector: "sysfs"}})
	_, errs := c.addDrops(&merge.Result{})
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
// without bound.
func TestLoggedCausesAreBounded(t *testing.T) {
	s := &Scraper{logged: map[string]bool{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i := range 3 * maxLogged {
		s.logOnce([]string{"hostile"}, []*supervise.Collection{{Errors: []*pluginv1.CollectError{{Collector: "c", Message: fmt.Sprint("message ", i)}}}}, &merge.Result{})
		if len(s.logged) > maxLogged {
			t.Fatalf("%d causes remembered after %d scrapes, want at most %d", len(s.logged), i+1, maxLogged)
		}
	}
}

package main

// End-to-end tests of the data path under a hostile plugin (issue 12): a
// plugin that floods series must cost its own series, not the host's
// memory; one bad string must cost one series, not the plugin's output.

import (
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// hostMemory returns the host process's resident set now and its peak
// since it started, in bytes.
func hostMemory(t *testing.T, h *host) (rss, peak uint64) {
	t.Helper()
	p, err := procfs.NewProc(h.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.NewStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st.VmRSS, st.VmHWM
}

func TestFloodingPluginDoesNotGrowHostMemory(t *testing.T) {
	const (
		good   = 5000     // series of the well-behaved plugin
		maxSer = 100000   // the default --plugin.max-series
		budget = 64 << 20 // what the flood may cost the host, above idle
	)
	// The flood writes gauges until the host stops its stream; without a
	// stop it runs for its whole 3 s timeout (millions of series).
	h := startHost(t, []string{"flood", "good"}, `
  flood: {config: {flood: true}, timeout: 3s}
  good: {config: {series: 5000}}
`)
	// Idle: the host after scraping the good plugin, so the baseline holds
	// what any scrape costs and the difference is the flood's alone.
	for range 3 {
		h.scrape("?exclude[]=flood")
	}
	idle, _ := hostMemory(t, h)
	for i := range 3 {
		text, mfs := h.scrape("")
		if n := count(mfs, "chaos_value", "plugin", "good"); n != good {
			t.Fatalf("scrape %d: the good plugin has %d series of %d", i, n, good)
		}
		if n := value(mfs, "plexporter_plugin_series", "plugin", "flood"); n != maxSer {
			t.Errorf("scrape %d: the flood exposed %v series, want its cap %d", i, n, maxSer)
		}
		// Stopped at the cap, not at the timeout: the host cancelled the
		// stream, and the plugin stopped with it (the SDK serves one Collect
		// at a time, so a plugin still flooding would hold the next scrape).
		if d := value(mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "flood"); d > 1.5 {
			t.Errorf("scrape %d: the flood's collect took %.2fs; it should stop at its series cap", i, d)
		}
		if d := value(mfs, "plexporter_dropped_series_total", "plugin", "flood", "reason", "series_limit"); d <= 0 {
			t.Errorf("scrape %d: series_limit drops of the flood = %v, want them counted", i, d)
		}
		if i == 0 {
			sdktest.Promtool(t, text)
		}
	}
	rss, peak := hostMemory(t, h)
	t.Logf("host memory: idle %.1f MiB, after the floods %.1f MiB, peak %.1f MiB (%.1f MiB above idle)",
		mib(idle), mib(rss), mib(peak), mib(peak)-mib(idle))
	if peak > idle+budget {
		t.Errorf("the flood raised the host's peak RSS %.1f MiB above idle, budget %d MiB", mib(peak)-mib(idle), budget>>20)
	}
	if n := strings.Count(h.logs.String(), `reason=series_limit`); n != 1 {
		t.Errorf("the series cap was logged %d times, want once", n)
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func TestInvalidUTF8CostsOneSeries(t *testing.T) {
	// The bad value comes first; the 20,000 good series after it fill
	// three batches, which a stream broken by the bad string would lose.
	h := startHost(t, []string{"junk"}, "  junk: {config: {series: 20000, invalid_utf8: true}}\n")
	text, mfs := h.scrape("")
	if n := count(mfs, "chaos_value", "plugin", "junk"); n != 20000 {
		t.Fatalf("%d good series exposed, want 20000", n)
	}
	if ok := value(mfs, "plexporter_plugin_scrape_success", "plugin", "junk"); ok != 1 {
		t.Errorf("scrape_success = %v, want 1", ok)
	}
	if d := value(mfs, "plexporter_dropped_series_total", "plugin", "junk", "reason", "invalid_label_value"); d != 1 {
		t.Errorf("invalid_label_value drops = %v, want 1", d)
	}
	if strings.Contains(text, "\xff") {
		t.Error("the invalid series reached the exposition")
	}
	sdktest.Promtool(t, text)
	if !strings.Contains(h.logs.String(), "reason=invalid_label_value") {
		t.Error("the drop was not logged")
	}
}

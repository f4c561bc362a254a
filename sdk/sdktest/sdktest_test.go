package sdktest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/internal/failtest"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// plugin writes what its test tells it to, declaring catalogue.
type plugin struct {
	catalogue []*sdk.Desc
	collect   func(w *sdk.Writer)
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{Name: "vendor", Version: "1", Metrics: p.catalogue}
}
func (p *plugin) Configure(context.Context, sdk.Config) error { return nil }
func (p *plugin) Collect(_ context.Context, w *sdk.Writer) error {
	p.collect(w)
	return nil
}

var (
	good = sdk.NewDesc("vendor_link_up", sdk.Gauge, "Link state.", "device")
	rx   = sdk.NewDesc("vendor_rx_bytes_total", sdk.Counter, "Bytes received.", "device")
)

// A plugin that keeps every rule passes, and its exposition is all of it:
// the checks below fail because of what each plugin does, not always.
func TestCleanPluginPasses(t *testing.T) {
	var res *sdktest.Result
	run := failtest.Run(t, func(tb *failtest.TB) {
		res = sdktest.Run(tb, &plugin{catalogue: []*sdk.Desc{good, rx}, collect: func(w *sdk.Writer) {
			w.Gauge(good, 1, "eth0")
			w.Gauge(good, 0, "eth1")
			w.Counter(rx, 42, "eth0")
		}}, sdktest.Options{})
	})
	if run.Failed() {
		t.Fatalf("a clean plugin failed its run: %q", run.Failures())
	}
	sdktest.Contains(t, res.Text(t), `vendor_link_up{device="eth0"} 1`, `vendor_link_up{device="eth1"} 0`, `vendor_rx_bytes_total{device="eth0"} 42`)
}

// Every rule of the host's guard, and every refusal of the Writer, fails
// the plugin's own run with a message naming the rule, the family and the
// series; the golden text holds only what the host would serve.
func TestGuardViolationsFailTheRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		catalogue []*sdk.Desc // in addition to good
		collect   func(w *sdk.Writer)
		want      []string // all in one failure message
		served    string   // a line the host still serves ("" for none)
		dropped   string   // a line the host would not serve
	}{
		{
			name: "duplicate series",
			collect: func(w *sdk.Writer) {
				w.Gauge(good, 1, "eth0")
				w.Gauge(good, 0, "eth0")
			},
			want:    []string{"duplicate", "vendor_link_up", `{device="eth0"}`, "exposed twice"},
			served:  `vendor_link_up{device="eth0"} 1`,
			dropped: `vendor_link_up{device="eth0"} 0`,
		},
		{
			name:    "wrong label count",
			collect: func(w *sdk.Writer) { w.Gauge(good, 1, "eth0", "port1") },
			want:    []string{"SDK refused", "vendor_link_up", "1 label names but a sample has 2 values"},
			dropped: `vendor_link_up`,
		},
		{
			name:    "wrong type",
			collect: func(w *sdk.Writer) { w.Counter(good, 1, "eth0") },
			want:    []string{"SDK refused", "vendor_link_up", "declared gauge but written as counter"},
			dropped: `vendor_link_up`,
		},
		{
			name:      "invalid metric name",
			catalogue: []*sdk.Desc{bad("vendor-link-up", sdk.Gauge, "device")},
			collect:   func(w *sdk.Writer) { w.Gauge(desc("vendor-link-up"), 1, "eth0") },
			want:      []string{"invalid_name", `invalid metric name "vendor-link-up"`},
			dropped:   `vendor-link-up`,
		},
		{
			name:      "invalid label name",
			catalogue: []*sdk.Desc{bad("vendor_temp_celsius", sdk.Gauge, "sensor-id")},
			collect:   func(w *sdk.Writer) { w.Gauge(desc("vendor_temp_celsius"), 40, "a") },
			want:      []string{"invalid_name", "vendor_temp_celsius", `invalid label name "sensor-id"`},
			dropped:   `vendor_temp_celsius`,
		},
		{
			name:    "label value not UTF-8",
			collect: func(w *sdk.Writer) { w.Gauge(good, 1, "eth\xff") },
			want:    []string{"invalid_label_value", "vendor_link_up", "label device"},
			dropped: `vendor_link_up`,
		},
		{
			name:      "reserved prefix",
			catalogue: []*sdk.Desc{bad("process_open_fds", sdk.Gauge)},
			collect:   func(w *sdk.Writer) { w.Gauge(desc("process_open_fds"), 3) },
			want:      []string{"conflict", "process_open_fds", "prefix process_ is reserved"},
			dropped:   `process_open_fds`,
		},
		{
			name:      "series name collision",
			catalogue: []*sdk.Desc{bad("vendor_lat_seconds", sdk.Histogram), bad("vendor_lat_seconds_count", sdk.Gauge)},
			collect: func(w *sdk.Writer) {
				w.Histogram(desc("vendor_lat_seconds"), []float64{1}, []uint64{1}, 2, 3)
				w.Gauge(desc("vendor_lat_seconds_count"), 7)
			},
			want:    []string{"name_collision", "vendor_lat_seconds_count"},
			served:  `vendor_lat_seconds_count 2`,
			dropped: `vendor_lat_seconds_count 7`,
		},
		{
			name:      "metadata conflict",
			catalogue: []*sdk.Desc{bad("vendor_errors_total", sdk.Counter, "device")},
			collect: func(w *sdk.Writer) {
				w.Counter(desc("vendor_errors_total"), 1, "eth0")
				w.Counter(sdk.NewDesc("vendor_errors_total", sdk.Counter, "Other help.", "device"), 2, "eth1")
			},
			want:    []string{"conflict", "vendor_errors_total", "help text"},
			served:  `vendor_errors_total{device="eth0"} 1`,
			dropped: `vendor_errors_total{device="eth1"}`,
		},
		{
			name:      "histogram bounds not ascending",
			catalogue: []*sdk.Desc{bad("vendor_wait_seconds", sdk.Histogram)},
			collect:   func(w *sdk.Writer) { w.Histogram(desc("vendor_wait_seconds"), []float64{2, 1}, []uint64{1, 1}, 1, 1) },
			want:      []string{"invalid_histogram", "vendor_wait_seconds"},
			dropped:   `vendor_wait_seconds`,
		},
		{
			name:      "summary quantile out of range",
			catalogue: []*sdk.Desc{bad("vendor_rtt_seconds", sdk.Summary)},
			collect:   func(w *sdk.Writer) { w.Summary(desc("vendor_rtt_seconds"), []float64{1.5}, []float64{1}, 1, 1) },
			want:      []string{"invalid_summary", "vendor_rtt_seconds"},
			dropped:   `vendor_rtt_seconds`,
		},
		{
			name:    "family not in the catalogue",
			collect: func(w *sdk.Writer) { w.Gauge(sdk.NewDesc("vendor_secret", sdk.Gauge, "Undeclared."), 1) },
			want:    []string{"vendor_secret", "not in the plugin's Info catalogue"},
			served:  `vendor_secret 1`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			descs = map[string]*sdk.Desc{}
			for _, d := range tc.catalogue {
				descs[d.Name] = d
			}
			var res *sdktest.Result
			run := failtest.Run(t, func(tb *failtest.TB) {
				res = sdktest.Run(tb, &plugin{catalogue: append([]*sdk.Desc{good}, tc.catalogue...), collect: tc.collect}, sdktest.Options{})
			})
			if !run.Failed() {
				t.Fatal("the run passed")
			}
			run.Expect(t, tc.want...)
			text := res.Text(t)
			if tc.served != "" {
				sdktest.Contains(t, text, tc.served)
			}
			if tc.dropped != "" {
				sdktest.Lacks(t, text, tc.dropped)
			}
		})
	}
}

// descs are the current case's catalogue entries by name.
var descs map[string]*sdk.Desc

func bad(name string, typ sdk.Type, labels ...string) *sdk.Desc {
	return sdk.NewDesc(name, typ, "Help.", labels...)
}

func desc(name string) *sdk.Desc { return descs[name] }

// A catalogue entry the host could never expose fails Run even before a
// sample is written.
func TestInvalidCatalogueFailsTheRun(t *testing.T) {
	run := failtest.Run(t, func(tb *failtest.TB) {
		sdktest.Run(tb, &plugin{catalogue: []*sdk.Desc{
			good,
			sdk.NewDesc("vendor_*_total", sdk.Counter, "Per kernel file."), // valid pattern
			sdk.NewDesc("vendor.bad", sdk.Gauge, "Dot."),
			sdk.NewDesc("vendor_untyped_thing", 0, "No type."),
			sdk.NewDesc("vendor_l", sdk.Gauge, "Label.", "__reserved"),
		}, collect: func(*sdk.Writer) {}}, sdktest.Options{})
	})
	run.Expect(t, `invalid metric name "vendor.bad"`)
	run.Expect(t, "vendor_untyped_thing has no type")
	run.Expect(t, `invalid label name "__reserved"`)
	for _, f := range run.Failures() {
		if strings.Contains(f, "vendor_*_total") {
			t.Errorf("a '*' pattern was refused: %s", f)
		}
	}
}

// A loop that repeats one series thousands of times lists a bounded number
// of drops and says how many more there were.
func TestManyDropsAreSummed(t *testing.T) {
	run := failtest.Run(t, func(tb *failtest.TB) {
		sdktest.Run(tb, &plugin{catalogue: []*sdk.Desc{good}, collect: func(w *sdk.Writer) {
			for range 1001 {
				w.Gauge(good, 1, "eth0")
			}
		}}, sdktest.Options{})
	})
	if n := len(run.Failures()); n != 11 {
		t.Errorf("%d failures, want 10 listed and one sum: %q", n, run.Failures())
	}
	run.Expect(t, "and 990 more drops for rule duplicate")
}

// The operator's label-length limit is applied, at the host's default
// unless the test sets another.
func TestLabelValueLength(t *testing.T) {
	long := strings.Repeat("x", 5000)
	p := &plugin{catalogue: []*sdk.Desc{good}, collect: func(w *sdk.Writer) { w.Gauge(good, 1, long) }}
	run := failtest.Run(t, func(tb *failtest.TB) { sdktest.Run(tb, p, sdktest.Options{}) })
	run.Expect(t, "invalid_label_value", "longer than 4096 bytes")
	run = failtest.Run(t, func(tb *failtest.TB) { sdktest.Run(tb, p, sdktest.Options{MaxLabelValueLen: 8192}) })
	if run.Failed() {
		t.Errorf("with --plugin.max-label-length 8192: %q", run.Failures())
	}
}

type warning struct{ plugin }

func (w *warning) Configure(_ context.Context, c sdk.Config) error {
	c.Warn("qp_counters is deprecated")
	return nil
}

// Run returns Configure's remarks, as the host would log them.
func TestRunReturnsConfigureWarnings(t *testing.T) {
	res := sdktest.Run(t, &warning{plugin{catalogue: []*sdk.Desc{good}, collect: func(*sdk.Writer) {}}}, sdktest.Options{})
	if len(res.Warnings) != 1 || res.Warnings[0] != "qp_counters is deprecated" {
		t.Fatalf("warnings %q", res.Warnings)
	}
}

// A family written otherwise than its catalogue entry says fails Run:
// operators read the catalogue in `plexporter metrics`.
func TestCatalogueMismatchFailsTheRun(t *testing.T) {
	run := failtest.Run(t, func(tb *failtest.TB) {
		sdktest.Run(tb, &plugin{catalogue: []*sdk.Desc{good, rx}, collect: func(w *sdk.Writer) {
			w.Counter(sdk.NewDesc("vendor_link_up", sdk.Counter, "Link state.", "device"), 1, "eth0")
			w.Counter(sdk.NewDesc("vendor_rx_bytes_total", sdk.Counter, "Bytes received.", "device", "queue"), 1, "eth0", "0")
		}}, sdktest.Options{})
	})
	run.Expect(t, "vendor_link_up is written as counter but its Info catalogue entry says gauge")
	run.Expect(t, `vendor_rx_bytes_total is written with labels ["device" "queue"] but its Info catalogue entry says ["device"]`)
}

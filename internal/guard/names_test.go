package guard

import (
	"testing"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// legacyMetricName and legacyLabelName are the host's hand-written checks
// from before it used prometheus/common/model; the tests below pin that the
// library accepts exactly the same names.
func legacyMetricName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func legacyLabelName(name string) bool {
	if name == "" || len(name) >= 2 && name[0] == '_' && name[1] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

var nameCorpus = []string{
	"", "a", "A", "_", ":", "__", "___", "_a", "__a", "a__", "a:b", ":a", "a:", "9", "9a", "a9", "_9", ":9",
	"rdma_port_rcv_bytes_total", "Up", "x-y", "x.y", "x y", "x/y", "é", "aé", "a\xff", "\xff", "a\x00",
	"ﬁ", "a\u00a0", "µs", "le", "quantile", "__name__", "a\n",
}

func TestNameChecksMatchLegacyRules(t *testing.T) {
	for _, name := range nameCorpus {
		if got, want := ValidMetricName(name), legacyMetricName(name); got != want {
			t.Errorf("ValidMetricName(%q) = %v, want %v", name, got, want)
		}
		if got, want := ValidLabelName(name), legacyLabelName(name); got != want {
			t.Errorf("ValidLabelName(%q) = %v, want %v", name, got, want)
		}
	}
	// Spot checks, so the corpus comparison cannot pass by both being wrong.
	for name, want := range map[string]bool{"a:b": true, "9a": false, "a9": true, "é": false, "": false} {
		if ValidMetricName(name) != want {
			t.Errorf("ValidMetricName(%q) != %v", name, want)
		}
	}
	for name, want := range map[string]bool{"a:b": false, "__a": false, "_a": true, "a__": true, "le": true} {
		if ValidLabelName(name) != want {
			t.Errorf("ValidLabelName(%q) != %v", name, want)
		}
	}
}

func FuzzNameChecksMatchLegacyRules(f *testing.F) {
	for _, name := range nameCorpus {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidMetricName(name), legacyMetricName(name); got != want {
			t.Errorf("ValidMetricName(%q) = %v, want %v", name, got, want)
		}
		if got, want := ValidLabelName(name), legacyLabelName(name); got != want {
			t.Errorf("ValidLabelName(%q) = %v, want %v", name, got, want)
		}
	})
}

func TestCheckNames(t *testing.T) {
	for _, tc := range []struct {
		desc    *wire.Header
		wantErr string // "" means valid
	}{
		{header("x_ok", pluginv1.MetricType_METRIC_TYPE_GAUGE, "", "dev", "port"), ""},
		{header("x:recorded", pluginv1.MetricType_METRIC_TYPE_GAUGE, ""), ""},
		{header("x_le_is_fine_on_gauges", pluginv1.MetricType_METRIC_TYPE_GAUGE, "", "le", "quantile"), ""},
		{header("x_quantile_on_histogram", pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, "", "quantile"), ""},
		{header("x_le_on_summary", pluginv1.MetricType_METRIC_TYPE_SUMMARY, "", "le"), ""},
		{header("9x", pluginv1.MetricType_METRIC_TYPE_GAUGE, ""), `invalid metric name "9x"`},
		{header("x-y", pluginv1.MetricType_METRIC_TYPE_GAUGE, ""), `invalid metric name "x-y"`},
		{header("x_bad_label", pluginv1.MetricType_METRIC_TYPE_GAUGE, "", "dev", "a:b"), `family x_bad_label: invalid label name "a:b"`},
		{header("x_reserved", pluginv1.MetricType_METRIC_TYPE_GAUGE, "", "__name__"), `family x_reserved: invalid label name "__name__"`},
		{header("x_twice", pluginv1.MetricType_METRIC_TYPE_GAUGE, "", "dev", "port", "dev"), `family x_twice: label "dev" given twice`},
		{header("x_hist", pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, "", "op", "le"), `family x_hist: label "le" is reserved for its type`},
		{header("x_sum", pluginv1.MetricType_METRIC_TYPE_SUMMARY, "", "quantile"), `family x_sum: label "quantile" is reserved for its type`},
		// The first problem in label order is reported.
		{header("x_order", pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, "", "le", "le"), `family x_order: label "le" is reserved for its type`},
		{header("x_order2", pluginv1.MetricType_METRIC_TYPE_GAUGE, "", "a", "a", "__b"), `family x_order2: label "a" given twice`},
	} {
		t.Run(tc.desc.Name, func(t *testing.T) {
			var rec wire.Recorder
			e := wire.NewEncoder(0, false, rec.Send)
			lv := make([]string, len(tc.desc.Labels))
			c := e.Open(tc.desc, nil, false)
			switch tc.desc.Type {
			case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
				e.AddHistogram(c, lv, nil, 0, 0)
			case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
				e.AddSummary(c, lv, nil, 0, 0)
			default:
				e.AddValue(c, lv, 1)
			}
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
			batches := rec.Batches
			if len(batches) != 1 || len(batches[0].Families) != 1 {
				t.Fatalf("writer produced %d batches", len(batches))
			}
			ch, err := wire.Open(batches[0], batches[0].Families[0])
			if err != nil {
				t.Fatal(err)
			}
			err = checkNames(ch)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("checkNames: %v, want valid", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("checkNames: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// header is the chunk header of a family written by TestCheckNames.
func header(name string, typ pluginv1.MetricType, help string, labels ...string) *wire.Header {
	return &wire.Header{Name: name, Type: typ, Help: help, Labels: labels}
}

func TestReservedPrefix(t *testing.T) {
	prefixes := []string{"plexporter_", "go_", "process_"}
	for name, want := range map[string]string{"go_goroutines": "go_", "process_cpu_seconds_total": "process_", "plexporter_up": "plexporter_", "gopher_count": "", "x_go_y": ""} {
		p, ok := reservedPrefix(name, prefixes)
		if p != want || ok != (want != "") {
			t.Errorf("reservedPrefix(%q) = %q, %v; want %q", name, p, ok, want)
		}
	}
	if _, ok := reservedPrefix("go_x", nil); ok {
		t.Error("no prefixes reserve nothing")
	}
}

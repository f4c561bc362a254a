package guard

import (
	"testing"

	"github.com/plexporter/plexporter/internal/batch"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/sdk"
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
		desc    *sdk.Desc
		wantErr string // "" means valid
	}{
		{sdk.NewDesc("x_ok", sdk.Gauge, "", "dev", "port"), ""},
		{sdk.NewDesc("x:recorded", sdk.Gauge, ""), ""},
		{sdk.NewDesc("x_le_is_fine_on_gauges", sdk.Gauge, "", "le", "quantile"), ""},
		{sdk.NewDesc("x_quantile_on_histogram", sdk.Histogram, "", "quantile"), ""},
		{sdk.NewDesc("x_le_on_summary", sdk.Summary, "", "le"), ""},
		{sdk.NewDesc("9x", sdk.Gauge, ""), `invalid metric name "9x"`},
		{sdk.NewDesc("x-y", sdk.Gauge, ""), `invalid metric name "x-y"`},
		{sdk.NewDesc("x_bad_label", sdk.Gauge, "", "dev", "a:b"), `family x_bad_label: invalid label name "a:b"`},
		{sdk.NewDesc("x_reserved", sdk.Gauge, "", "__name__"), `family x_reserved: invalid label name "__name__"`},
		{sdk.NewDesc("x_twice", sdk.Gauge, "", "dev", "port", "dev"), `family x_twice: label "dev" given twice`},
		{sdk.NewDesc("x_hist", sdk.Histogram, "", "op", "le"), `family x_hist: label "le" is reserved for its type`},
		{sdk.NewDesc("x_sum", sdk.Summary, "", "quantile"), `family x_sum: label "quantile" is reserved for its type`},
		// The first problem in label order is reported.
		{sdk.NewDesc("x_order", sdk.Histogram, "", "le", "le"), `family x_order: label "le" is reserved for its type`},
		{sdk.NewDesc("x_order2", sdk.Gauge, "", "a", "a", "__b"), `family x_order2: label "a" given twice`},
	} {
		t.Run(tc.desc.Name, func(t *testing.T) {
			batches := batchtest.Record(func(w *sdk.Writer) {
				lv := make([]string, len(tc.desc.Labels))
				switch tc.desc.Type {
				case sdk.Histogram:
					w.Histogram(tc.desc, nil, nil, 0, 0, lv...)
				case sdk.Summary:
					w.Summary(tc.desc, nil, nil, 0, 0, lv...)
				default:
					w.Gauge(tc.desc, 1, lv...)
				}
			})
			if len(batches) != 1 || len(batches[0].Families) != 1 {
				t.Fatalf("writer produced %d batches", len(batches))
			}
			ch, err := batch.Open(batches[0], batches[0].Families[0])
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

package wire

import (
	"strings"
	"testing"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

const (
	counter   = pluginv1.MetricType_METRIC_TYPE_COUNTER
	gauge     = pluginv1.MetricType_METRIC_TYPE_GAUGE
	histogram = pluginv1.MetricType_METRIC_TYPE_HISTOGRAM
	summary   = pluginv1.MetricType_METRIC_TYPE_SUMMARY
)

// strs is a string table: 1 family name, 2 help, 3 unit, 4 label name, 5-6 values.
var strs = table("", "x_seconds", "Help.", "seconds", "dev", "a", "b")

// table builds a string table.
func table(strs ...string) [][]byte {
	out := make([][]byte, len(strs))
	for i, s := range strs {
		out[i] = []byte(s)
	}
	return out
}

func TestCheck(t *testing.T) {
	okGauge := func() *pluginv1.FamilyChunk {
		return &pluginv1.FamilyChunk{Name: 1, Type: gauge, Help: 2, Unit: 3, LabelNames: []uint32{4}, LabelValues: []uint32{5, 6}, Values: []float64{1, 2}}
	}
	okHist := func() *pluginv1.FamilyChunk {
		return &pluginv1.FamilyChunk{Name: 1, Type: histogram, LabelNames: []uint32{4}, LabelValues: []uint32{5}, Values: []float64{1}, Counts: []uint64{3}, Bounds: []float64{1, 2}, BucketCounts: []uint64{1, 2}}
	}
	okSummary := func() *pluginv1.FamilyChunk {
		return &pluginv1.FamilyChunk{Name: 1, Type: summary, Values: []float64{1, 2}, Counts: []uint64{3, 4}, Bounds: []float64{.5}, QuantileValues: []float64{.1, .2}}
	}
	for _, tc := range []struct {
		name    string
		strs    [][]byte
		chunk   *pluginv1.FamilyChunk
		wantErr string // "" means valid
	}{
		{"gauge", strs, okGauge(), ""},
		{"histogram", strs, okHist(), ""},
		{"summary", strs, okSummary(), ""},
		{"no samples", strs, &pluginv1.FamilyChunk{Name: 1, Type: counter, LabelNames: []uint32{4}}, ""},
		{"empty string table", nil, okGauge(), "string table must start with the empty string"},
		{"string table not starting with empty", table("x"), &pluginv1.FamilyChunk{Type: gauge}, "string table must start with the empty string"},
		{"name out of range", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Name = 7; return c }(), "name index 7 out of range"},
		{"help out of range", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Help = 99; return c }(), "family x_seconds: help or unit index"},
		{"unit out of range", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Unit = 99; return c }(), "family x_seconds: help or unit index"},
		{"unspecified type", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Type = 0; return c }(), "family x_seconds: unknown type 0"},
		{"unknown type", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Type = 42; return c }(), "family x_seconds: unknown type 42"},
		{"label name out of range", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.LabelNames[0] = 7; return c }(), "family x_seconds: label name index 7"},
		{"too many label values", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.LabelValues = append(c.LabelValues, 5); return c }(), "family x_seconds: 3 label values for 2 samples of 1 labels"},
		{"label value out of range", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.LabelValues[1] = 999; return c }(), "family x_seconds: label value index 999"},
		{"gauge with counts", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Counts = []uint64{1, 1}; return c }(), "family x_seconds: METRIC_TYPE_GAUGE chunk carries histogram or summary columns"},
		{"gauge with bounds", strs, func() *pluginv1.FamilyChunk { c := okGauge(); c.Bounds = []float64{1}; return c }(), "carries histogram or summary columns"},
		{"histogram short bucket counts", strs, func() *pluginv1.FamilyChunk { c := okHist(); c.BucketCounts = c.BucketCounts[:1]; return c }(), "family x_seconds: histogram columns do not match 1 samples of 2 buckets"},
		{"histogram without counts", strs, func() *pluginv1.FamilyChunk { c := okHist(); c.Counts = nil; return c }(), "histogram columns do not match"},
		{"histogram with quantile values", strs, func() *pluginv1.FamilyChunk { c := okHist(); c.QuantileValues = []float64{1}; return c }(), "histogram columns do not match"},
		{"summary short quantile values", strs, func() *pluginv1.FamilyChunk { c := okSummary(); c.QuantileValues = c.QuantileValues[:1]; return c }(), "family x_seconds: summary columns do not match 2 samples of 1 quantiles"},
		{"summary with bucket counts", strs, func() *pluginv1.FamilyChunk { c := okSummary(); c.BucketCounts = []uint64{1, 1}; return c }(), "summary columns do not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &pluginv1.Batch{Strings: tc.strs, Families: []*pluginv1.FamilyChunk{tc.chunk}}
			err := Check(b, tc.chunk)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v, want valid", err)
				}
				if _, err := Open(b, tc.chunk); err != nil {
					t.Fatalf("Open: %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check: %v, want an error containing %q", err, tc.wantErr)
			}
			if _, oerr := Open(b, tc.chunk); oerr == nil || oerr.Error() != err.Error() {
				t.Fatalf("Open: %v, want Check's error %v", oerr, err)
			}
		})
	}
}

package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// copyFixture copies testdata/telemetry_dir to a temporary directory:
// draining rewrites read_pos.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir("testdata/telemetry_dir")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("testdata/telemetry_dir", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// samples flattens an exposition into "name{label="v",...}" -> value, the
// labels sorted and those in drop left out; histograms become their
// _bucket, _sum and _count samples.
func samples(t *testing.T, r io.Reader, drop ...string) map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(r)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if !slices.Contains(drop, l.GetName()) {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			key := func(suffix string, extra ...string) string {
				ls := append(slices.Clone(labels), extra...)
				slices.Sort(ls)
				return name + suffix + "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					out[key("_bucket", fmt.Sprintf("le=%q", model.FloatString(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				out[key("_bucket", `le="+Inf"`)] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				out[key("_count")] = float64(h.GetSampleCount())
			case m.Counter != nil:
				out[key("")] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key("")] = m.GetGauge().GetValue()
			default:
				out[key("")] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// value is one sample of a flattened exposition; the test fails if it is
// missing.
func value(t *testing.T, s map[string]float64, key string) float64 {
	t.Helper()
	v, ok := s[key]
	if !ok {
		t.Fatalf("no sample %s", key)
	}
	return v
}

// wantValues fails for every key whose value differs (NaN never equals).
func wantValues(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("missing %s (want %v)", k, want[k])
		case g != want[k] || math.IsNaN(g):
			t.Errorf("%s = %v, want %v", k, g, want[k])
		}
	}
}

func collectText(t *testing.T, res *sdktest.Result) string {
	t.Helper()
	if res.Status != nil {
		t.Fatalf("collect failed: %v", res.Status)
	}
	return res.Text(t)
}

package sdk_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/wire"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

var nativeDesc = sdk.NewDesc("demo_native_seconds", sdk.Histogram, "Native latency.", "op")

func TestSetPositiveBuckets(t *testing.T) {
	for name, tc := range map[string]struct {
		first   int32
		counts  []uint64
		spans   []sdk.BucketSpan
		buckets []uint64
	}{
		"empty":                 {0, []uint64{0, 0}, nil, nil},
		"one run, trimmed":      {-5, []uint64{0, 2, 3, 0}, []sdk.BucketSpan{{-4, 2}}, []uint64{2, 3}},
		"short gap kept inside": {0, []uint64{1, 0, 0, 1}, []sdk.BucketSpan{{0, 4}}, []uint64{1, 0, 0, 1}},
		"long gap splits":       {10, []uint64{1, 0, 0, 0, 5, 6}, []sdk.BucketSpan{{10, 1}, {3, 2}}, []uint64{1, 5, 6}},
	} {
		t.Run(name, func(t *testing.T) {
			var h sdk.NativeHistogram
			h.SetPositiveBuckets(tc.first, tc.counts)
			if !slices.Equal(h.PositiveSpans, tc.spans) || !slices.Equal(h.PositiveBuckets, tc.buckets) {
				t.Errorf("spans %v buckets %v, want %v %v", h.PositiveSpans, h.PositiveBuckets, tc.spans, tc.buckets)
			}
		})
	}
}

// The Writer packs native histograms into the chunk's native columns, as
// deltas, and keeps native and classic-only samples in separate chunks.
func TestWriterNativeHistogram(t *testing.T) {
	var rec wire.Recorder
	w := sdkNewWriter(&rec)
	h := sdk.NativeHistogram{Count: 6, Sum: 2, Schema: 1, ZeroThreshold: 1e-6, ZeroCount: 1,
		NegativeSpans: []sdk.BucketSpan{{Offset: 2, Length: 1}}, NegativeBuckets: []uint64{1}}
	h.SetPositiveBuckets(-2, []uint64{3, 1})
	w.NativeHistogram(nativeDesc, h, "read")
	w.Histogram(nativeDesc, []float64{1}, []uint64{1}, 1, 1, "classic")
	w.NativeHistogram(nativeDesc, sdk.NativeHistogram{Count: 1, Sum: 1, PositiveSpans: []sdk.BucketSpan{{0, 1}}, PositiveBuckets: []uint64{1}}, "write")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(rec.Errors) != 0 {
		t.Fatalf("errors: %v", rec.Errors)
	}
	fams := rec.Batches[0].Families
	if len(fams) != 3 {
		t.Fatalf("%d chunks, want 3 (native, classic, native again)", len(fams))
	}
	c := fams[0]
	if !slices.Equal(c.NativeSchemas, []int32{1}) || !slices.Equal(c.NativeDeltas, []int64{3, -2, 1}) ||
		!slices.Equal(c.NativeSpanOffsets, []int32{-2, 2}) || !slices.Equal(c.NativeSpanLengths, []uint32{2, 1}) ||
		!slices.Equal(c.NativePositiveSpanCounts, []uint32{1}) || !slices.Equal(c.NativeNegativeSpanCounts, []uint32{1}) ||
		!slices.Equal(c.NativeZeroCounts, []uint64{1}) || c.NativeZeroThresholds[0] != 1e-6 || c.Counts[0] != 6 || c.Values[0] != 2 {
		t.Errorf("native chunk: %v", c)
	}
	if len(fams[1].NativeSchemas) != 0 || len(fams[1].Bounds) != 1 {
		t.Errorf("classic chunk carries native columns: %v", fams[1])
	}
	for _, f := range fams {
		if err := wire.Check(rec.Batches[0], f); err != nil {
			t.Errorf("chunk the SDK wrote fails Check: %v", err)
		}
	}
}

// A histogram without bounds after one with them (or the reverse) gets a
// chunk of its own: joined, its chunk's bucket column would be short.
func TestWriterHistogramWithoutBoundsAfterOneWith(t *testing.T) {
	var rec wire.Recorder
	w := sdkNewWriter(&rec)
	w.Histogram(latDesc, []float64{1, 2}, []uint64{1, 2}, 3, 1, "a")
	w.Histogram(latDesc, nil, nil, 3, 1, "b")
	w.Flush()
	for _, f := range rec.Batches[0].Families {
		if err := wire.Check(rec.Batches[0], f); err != nil {
			t.Errorf("malformed chunk: %v", err)
		}
	}
}

// The Writer refuses what the host's guard would drop, as a partial error
// of "sdk" that names the rule.
func TestWriterNativeHistogramMisuse(t *testing.T) {
	good := func() sdk.NativeHistogram {
		return sdk.NativeHistogram{Count: 3, Sum: 1, ZeroCount: 1, PositiveSpans: []sdk.BucketSpan{{0, 2}}, PositiveBuckets: []uint64{1, 1}}
	}
	for name, tc := range map[string]struct {
		breakIt func(h *sdk.NativeHistogram)
		want    string
	}{
		"schema":           {func(h *sdk.NativeHistogram) { h.Schema = 9 }, "schema 9 outside [-4, 8]"},
		"zero threshold":   {func(h *sdk.NativeHistogram) { h.ZeroThreshold = math.NaN() }, "zero threshold NaN"},
		"spans vs buckets": {func(h *sdk.NativeHistogram) { h.PositiveSpans[0].Length = 3 }, "positive spans cover 3 buckets but 2 counts"},
		"negative gap":     {func(h *sdk.NativeHistogram) { h.PositiveSpans = []sdk.BucketSpan{{0, 1}, {-1, 1}} }, "positive span 1 has offset -1"},
		"count":            {func(h *sdk.NativeHistogram) { h.Count = 4 }, "hold 3 observations but the count is 4"},
		"classic mismatch": {func(h *sdk.NativeHistogram) { h.Bounds = []float64{1} }, "1 bounds but 0 bucket counts"},
		"negative vs count": {func(h *sdk.NativeHistogram) {
			h.NegativeSpans, h.NegativeBuckets = []sdk.BucketSpan{{0, 1}}, []uint64{2}
		}, "hold 5 observations"},
	} {
		t.Run(name, func(t *testing.T) {
			var rec wire.Recorder
			w := sdkNewWriter(&rec)
			h := good()
			w.NativeHistogram(nativeDesc, h, "ok")
			tc.breakIt(&h)
			w.NativeHistogram(nativeDesc, h, "bad")
			w.Flush()
			if len(rec.Errors) != 1 || rec.Errors[0].GetCollector() != "sdk" || !strings.Contains(rec.Errors[0].GetMessage(), tc.want) {
				t.Fatalf("errors %v, want one sdk error containing %q", rec.Errors, tc.want)
			}
			if n := len(rec.Batches[0].Families[0].Values); n != 1 {
				t.Errorf("%d samples written, want only the good one", n)
			}
		})
	}
}

func sdkNewWriter(rec *wire.Recorder) *sdk.Writer { return sdktest.NewWriter(nil, "", rec.Send) }

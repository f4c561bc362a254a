package main

import (
	"slices"
	"testing"

	"github.com/plexporter/plexporter/internal/wire"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestSchema0Start(t *testing.T) {
	if first, ok := schema0Start(defaultBounds()); !ok || first != minDefaultExp {
		t.Errorf("default bounds: %d %v, want %d true", first, ok, minDefaultExp)
	}
	if first, ok := schema0Start(defaultConnBounds()); !ok || first != minConnExp {
		t.Errorf("connection bounds: %d %v, want %d true", first, ok, minConnExp)
	}
	for _, b := range [][]float64{nil, {0.0005, 0.001}, {0.25, 1}, {1, 2, 4, 16}, {3}} {
		if _, ok := schema0Start(b); ok {
			t.Errorf("%v taken for schema 0 bounds", b)
		}
	}
}

// The native form of the programs' classic buckets: the first classic
// bucket is the zero bucket, the others native buckets one to one, the
// +Inf bucket the one above the last bound; the classic buckets stay
// beside it, and the host's guard accepts it.
func TestSchema0Native(t *testing.T) {
	bounds := []float64{0.25, 0.5, 1, 2} // 2^-2 … 2^1
	cumulative := []uint64{1, 1, 4, 9}   // per bucket: 1, 0, 3, 5; +Inf 2
	h := schema0Native(-2, bounds, cumulative, 11, 12.5)
	if h.ZeroThreshold != 0.25 || h.ZeroCount != 1 || h.Schema != 0 || h.Count != 11 || h.Sum != 12.5 {
		t.Errorf("native: %+v", h)
	}
	// Native buckets -1 (0.25, 0.5]: 0, 0 (0.5, 1]: 3, 1 (1, 2]: 5, 2 (2, 4]: 2.
	if !slices.Equal(h.PositiveSpans, []sdk.BucketSpan{{Offset: 0, Length: 3}}) || !slices.Equal(h.PositiveBuckets, []uint64{3, 5, 2}) {
		t.Errorf("spans %v buckets %v", h.PositiveSpans, h.PositiveBuckets)
	}
	if !slices.Equal(h.Bounds, bounds) || !slices.Equal(h.Cumulative, cumulative) {
		t.Errorf("classic buckets beside it: %v %v", h.Bounds, h.Cumulative)
	}
	d := sdk.NewDesc("t_latency_seconds", sdk.Histogram, "L.", "dev")
	var rec wire.Recorder
	w := sdktest.NewWriter(nil, "", rec.Send)
	writeLatency(w, true, d, bounds, cumulative, 11, 12.5, "sda")
	writeLatency(w, true, d, []float64{0.001, 0.005}, []uint64{1, 2}, 3, 0.01, "sdb") // not schema 0: classic
	writeLatency(w, false, d, bounds, cumulative, 11, 12.5, "sdc")                    // switched off: classic
	if err := w.Flush(); err != nil || len(rec.Errors) != 0 {
		t.Fatalf("flush %v, errors %v", err, rec.Errors)
	}
	var native []string
	for _, b := range rec.Batches {
		for _, c := range b.Families {
			ch, err := wire.Open(b, c)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ch.Len() {
				if ch.IsNative() {
					native = append(native, ch.LabelValue(i, 0))
				}
			}
		}
	}
	if !slices.Equal(native, []string{"sda"}) {
		t.Errorf("native histograms for %v, want only sda", native)
	}
}

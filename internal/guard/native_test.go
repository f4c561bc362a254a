package guard_test

import (
	"math"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// nativeBatch is a batch of one native chunk of two valid samples, "good"
// and "bad"; each guard test breaks the sample "bad" (index 1) and expects
// only it dropped. bad has one positive span [0, 2) with counts 1 and 2 and
// a zero bucket of 1: count 4.
func nativeBatch() (*pluginv1.Batch, *pluginv1.FamilyChunk) {
	c := &pluginv1.FamilyChunk{
		Name: 1, Type: pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, Help: 2,
		LabelNames: []uint32{3}, LabelValues: []uint32{4, 5},
		Values: []float64{0.5, 3}, Counts: []uint64{1, 4},
		NativeSchemas: []int32{0, 0}, NativeZeroThresholds: []float64{0, 1e-3}, NativeZeroCounts: []uint64{0, 1},
		NativePositiveSpanCounts: []uint32{1, 1}, NativeNegativeSpanCounts: []uint32{0, 0},
		NativeSpanOffsets: []int32{-1, 0}, NativeSpanLengths: []uint32{1, 2},
		NativeDeltas: []int64{1, 1, 1},
	}
	b := &pluginv1.Batch{Strings: [][]byte{nil, []byte("x_native_seconds"), []byte("N."), []byte("op"), []byte("good"), []byte("bad")}, Families: []*pluginv1.FamilyChunk{c}}
	return b, c
}

func TestNativeHistogramGuard(t *testing.T) {
	for name, tc := range map[string]struct {
		breakIt func(c *pluginv1.FamilyChunk)
		cause   string
	}{
		"schema above 8":          {func(c *pluginv1.FamilyChunk) { c.NativeSchemas[1] = 9 }, "schema 9 outside [-4, 8]"},
		"schema below -4":         {func(c *pluginv1.FamilyChunk) { c.NativeSchemas[1] = -5 }, "schema -5 outside"},
		"negative zero threshold": {func(c *pluginv1.FamilyChunk) { c.NativeZeroThresholds[1] = -1e-3 }, "zero threshold -0.001"},
		"NaN zero threshold":      {func(c *pluginv1.FamilyChunk) { c.NativeZeroThresholds[1] = math.NaN() }, "zero threshold NaN"},
		"infinite zero threshold": {func(c *pluginv1.FamilyChunk) { c.NativeZeroThresholds[1] = math.Inf(1) }, "zero threshold +Inf"},
		"negative bucket count":   {func(c *pluginv1.FamilyChunk) { c.NativeDeltas[2] = -2; c.Counts[1] = 1 }, "positive bucket 1: count negative"},
		"count above the buckets": {func(c *pluginv1.FamilyChunk) { c.Counts[1] = 5 }, "hold 4 observations, but the count is 5"},
		"count below the buckets": {func(c *pluginv1.FamilyChunk) { c.Counts[1] = 3 }, "hold 4 observations, but the count is 3"},
		"NaN sum, fewer in buckets than the count is fine, more is not": {func(c *pluginv1.FamilyChunk) {
			c.Values[1], c.Counts[1] = math.NaN(), 3
		}, "hold 4 observations, but the count is 3"},
		"negative gap between spans": {func(c *pluginv1.FamilyChunk) {
			c.NativePositiveSpanCounts[1] = 2
			c.NativeSpanOffsets = []int32{-1, 0, -1}
			c.NativeSpanLengths = []uint32{1, 1, 1}
		}, "positive span 1 has offset -1"},
		"overflowing deltas": {func(c *pluginv1.FamilyChunk) { c.NativeDeltas[1] = math.MaxInt64; c.NativeDeltas[2] = math.MaxInt64 }, "count negative (or out of range)"},
	} {
		t.Run(name, func(t *testing.T) {
			b, c := nativeBatch()
			tc.breakIt(c)
			r := guard.Merge([]guard.Input{{Plugin: "p", Batches: []*pluginv1.Batch{b}}}, guard.Options{})
			k := guard.DropKey{Plugin: "p", Reason: guard.ReasonInvalidHistogram}
			if r.Drops[k] != 1 || !strings.Contains(r.Causes[k], tc.cause) || !strings.Contains(r.Causes[k], `op="bad"`) {
				t.Errorf("drops %v, cause %q; want one invalid_histogram drop of the bad series for %q", r.Drops, r.Causes[k], tc.cause)
			}
			if got := series(r, "x_native_seconds"); len(got) != 1 || got[0] != "good" {
				t.Errorf("exposed %v, want only the good series", got)
			}
		})
	}
}

func TestNativeHistogramGuardAccepts(t *testing.T) {
	b, c := nativeBatch()
	// A NaN observation counts in no bucket: with a NaN sum the count may
	// exceed what the buckets hold.
	c.Values[1], c.Counts[1] = math.NaN(), 5
	inputs := []guard.Input{{Plugin: "p", Batches: []*pluginv1.Batch{b}}, {Plugin: "q", Batches: batchtest.Natives("y_")}}
	r := guard.Merge(inputs, guard.Options{})
	if len(r.Drops) != 0 {
		t.Fatalf("valid native histograms dropped: %v %v", r.Drops, r.Causes)
	}
	if got, other := series(r, "x_native_seconds"), series(r, "y_native_seconds"); len(got) != 2 || len(other) != 4 {
		t.Errorf("exposed %v and %v, want the 2 hand-made and the 4 of batchtest.Natives", got, other)
	}
	// Native histograms count their classic series: p's two 3 each; q's
	// native-only two ("only", "empty") 3 each, "both" 2+3, "classic" 1+3.
	if r.Series["p"] != 6 || r.Series["q"] != 6+5+4 {
		t.Errorf("series %v, want p 6 and q 15", r.Series)
	}
}

func TestNativeShapeIsMalformed(t *testing.T) {
	b, c := nativeBatch()
	c.NativeDeltas = c.NativeDeltas[:2] // the spans address 3 buckets
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: []*pluginv1.Batch{b}}}, guard.Options{})
	k := guard.DropKey{Plugin: "p", Reason: guard.ReasonMalformed}
	if r.Drops[k] != 2 || !strings.Contains(r.Causes[k], "add up to 3 buckets, but there are 2 deltas") {
		t.Errorf("drops %v, cause %q; want the chunk's 2 samples malformed", r.Drops, r.Causes[k])
	}
}

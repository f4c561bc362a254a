package batch_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/batch"
	"github.com/plexporter/plexporter/internal/batch/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// nativeChunks opens every chunk of the Natives fixture.
func nativeChunks(t testing.TB) []batch.Chunk {
	t.Helper()
	var out []batch.Chunk
	for _, b := range batchtest.Natives("t_") {
		for _, c := range b.Families {
			ch, err := batch.Open(b, c)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ch)
		}
	}
	return out
}

func TestNativeView(t *testing.T) {
	chunks := nativeChunks(t)
	// only and empty share a chunk; both has classic bounds, so a chunk of
	// its own; the classic sample another.
	if len(chunks) != 3 || !chunks[0].IsNative() || !chunks[1].IsNative() || chunks[2].IsNative() {
		t.Fatalf("want two native chunks then a classic one, got %d chunks", len(chunks))
	}
	ch := chunks[0]
	if ch.Len() != 2 || ch.SeriesPerSample() != 3 {
		t.Fatalf("native chunk: %d samples, %d series each; want 2 and 3 (no bounds: +Inf, _sum, _count)", ch.Len(), ch.SeriesPerSample())
	}
	only := ch.Native(0)
	if only.Schema != 0 || !slices.Equal(only.PositiveOffsets, []int32{-3, 3}) || !slices.Equal(only.PositiveLengths, []uint32{2, 2}) ||
		!slices.Equal(only.PositiveDeltas, []int64{1, 3, -2, 1}) || len(only.NegativeOffsets)+len(only.NegativeDeltas) != 0 {
		t.Errorf("native-only sample = %+v", only)
	}
	if ch.Count(0) != 10 || ch.Value(0) != 1.75 {
		t.Errorf("native-only sample: count %d sum %v", ch.Count(0), ch.Value(0))
	}
	if empty := ch.Native(1); empty.Schema != -4 || !batch.NeedsNoopSpan(empty) || batch.NeedsNoopSpan(only) {
		t.Errorf("empty sample = %+v, or the no-op span rule is wrong", empty)
	}
	bc := chunks[1]
	both := bc.Native(0)
	if both.Schema != 3 || both.ZeroThreshold != 1e-9 || both.ZeroCount != 2 ||
		!slices.Equal(both.PositiveDeltas, []int64{3, -2}) || !slices.Equal(both.NegativeOffsets, []int32{-1}) ||
		!slices.Equal(both.NegativeLengths, []uint32{1}) || !slices.Equal(both.NegativeDeltas, []int64{1}) {
		t.Errorf("native sample with negative buckets = %+v", both)
	}
	if bounds, cum := bc.Buckets(0); !slices.Equal(bounds, []float64{0, 1}) || !slices.Equal(cum, []uint64{3, 6}) || bc.SeriesPerSample() != 5 {
		t.Errorf("classic buckets beside the native ones: %v %v, %d series", bounds, cum, bc.SeriesPerSample())
	}
	if got := batch.Series(&pluginv1.Batch{Families: []*pluginv1.FamilyChunk{{Type: pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, Values: []float64{0}, NativeSchemas: []int32{0}}}}); got != 3 {
		t.Errorf("a native histogram counts %d series, want 3 (its classic series)", got)
	}
}

func TestNativeViewDoesNotAllocate(t *testing.T) {
	var sink int
	for _, ch := range nativeChunks(t) {
		if !ch.IsNative() {
			continue
		}
		allocs := testing.AllocsPerRun(100, func() {
			for i := range ch.Len() {
				n := ch.Native(i)
				sink += int(n.Schema) + len(n.PositiveDeltas) + len(n.NegativeDeltas) + len(n.PositiveOffsets)
			}
		})
		if allocs != 0 {
			t.Errorf("%v allocations per pass over a native chunk, want 0", allocs)
		}
	}
	_ = sink
}

// nativeChunk is a valid two-sample native chunk the shape tests break.
func nativeChunk() (*pluginv1.Batch, *pluginv1.FamilyChunk) {
	c := &pluginv1.FamilyChunk{
		Name: 1, Type: pluginv1.MetricType_METRIC_TYPE_HISTOGRAM,
		Values: []float64{1, 2}, Counts: []uint64{3, 1},
		NativeSchemas: []int32{0, 1}, NativeZeroThresholds: []float64{0, 0}, NativeZeroCounts: []uint64{0, 0},
		NativePositiveSpanCounts: []uint32{1, 0}, NativeNegativeSpanCounts: []uint32{0, 1},
		NativeSpanOffsets: []int32{0, -2}, NativeSpanLengths: []uint32{2, 1},
		NativeDeltas: []int64{1, 1, 1},
	}
	return &pluginv1.Batch{Strings: [][]byte{nil, []byte("h")}}, c
}

func TestCheckNativeShape(t *testing.T) {
	b, c := nativeChunk()
	ch, err := batch.Open(b, c)
	if err != nil {
		t.Fatalf("valid native chunk refused: %v", err)
	}
	if n := ch.Native(1); !slices.Equal(n.NegativeOffsets, []int32{-2}) || !slices.Equal(n.NegativeDeltas, []int64{1}) || len(n.PositiveDeltas) != 0 {
		t.Errorf("second sample = %+v", n)
	}
	for name, tc := range map[string]struct {
		breakIt func(c *pluginv1.FamilyChunk)
		want    string
	}{
		"schema per sample":      {func(c *pluginv1.FamilyChunk) { c.NativeSchemas = c.NativeSchemas[:1] }, "do not match 2 samples"},
		"zero counts per sample": {func(c *pluginv1.FamilyChunk) { c.NativeZeroCounts = nil }, "do not match 2 samples"},
		"span counts vs spans":   {func(c *pluginv1.FamilyChunk) { c.NativePositiveSpanCounts[0] = 2 }, "add up to 3 spans"},
		"offsets vs lengths":     {func(c *pluginv1.FamilyChunk) { c.NativeSpanOffsets = append(c.NativeSpanOffsets, 0) }, "3 span offsets and 2 span lengths"},
		"lengths vs deltas":      {func(c *pluginv1.FamilyChunk) { c.NativeSpanLengths[0] = 3 }, "add up to 4 buckets, but there are 3 deltas"},
		"wrapping span counts":   {func(c *pluginv1.FamilyChunk) { c.NativePositiveSpanCounts[0] = 1<<32 - 1; c.NativeNegativeSpanCounts[1] = 2 }, "span counts add up"},
		"native on a counter": {func(c *pluginv1.FamilyChunk) {
			c.Type, c.Counts = pluginv1.MetricType_METRIC_TYPE_COUNTER, nil
		}, "carries native histogram columns"},
		"deltas without schemas": {func(c *pluginv1.FamilyChunk) { c.NativeSchemas = nil }, "do not match 2 samples"},
	} {
		t.Run(name, func(t *testing.T) {
			b, c := nativeChunk()
			tc.breakIt(c)
			err := batch.Check(b, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzCheck decodes arbitrary bytes as a batch: every chunk Check accepts
// must be readable through the view, native histograms included, without
// a panic, and Series and Size must work on any decoded batch.
func FuzzCheck(f *testing.F) {
	for _, bs := range [][]*pluginv1.Batch{batchtest.Natives("f_"), batchtest.Mix("m_", 30)} {
		for _, b := range bs {
			wire, err := proto.Marshal(b)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(wire)
		}
	}
	b, c := nativeChunk()
	b.Families = []*pluginv1.FamilyChunk{c}
	wire, _ := proto.Marshal(b)
	f.Add(wire)
	f.Fuzz(func(t *testing.T, wire []byte) {
		var b pluginv1.Batch
		if proto.Unmarshal(wire, &b) != nil {
			return
		}
		_, _ = batch.Series(&b), batch.Size(&b)
		for _, c := range b.Families {
			ch, err := batch.Open(&b, c)
			if err != nil {
				continue
			}
			total := 0
			for i := range ch.Len() {
				_ = ch.Metric(i)
				if ch.IsNative() {
					n := ch.Native(i)
					total += len(n.PositiveDeltas) + len(n.NegativeDeltas)
					if len(n.PositiveOffsets) != len(n.PositiveLengths) || len(n.NegativeOffsets) != len(n.NegativeLengths) {
						t.Fatalf("sample %d: spans do not pair up: %+v", i, n)
					}
				}
			}
			if ch.IsNative() && total != len(c.NativeDeltas) {
				t.Fatalf("the samples' deltas add up to %d of the chunk's %d", total, len(c.NativeDeltas))
			}
		}
	})
}

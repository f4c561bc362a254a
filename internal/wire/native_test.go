package wire_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// nativeChunks opens every chunk of the Natives fixture.
func nativeChunks(t testing.TB) []wire.Chunk {
	t.Helper()
	var out []wire.Chunk
	for _, b := range batchtest.Natives("t_") {
		for _, c := range b.Families {
			ch, err := wire.Open(b, c)
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
	if empty := ch.Native(1); empty.Schema != -4 || !wire.NeedsNoopSpan(empty) || wire.NeedsNoopSpan(only) {
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
	if got := wire.Series(&pluginv1.Batch{Families: []*pluginv1.FamilyChunk{{Type: pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, Values: []float64{0}, NativeSchemas: []int32{0}}}}); got != 3 {
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
	ch, err := wire.Open(b, c)
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
		"wrapping span counts": {func(c *pluginv1.FamilyChunk) {
			c.NativePositiveSpanCounts[0] = 1<<32 - 1
			c.NativeNegativeSpanCounts[1] = 2
		}, "span counts add up"},
		"native on a counter": {func(c *pluginv1.FamilyChunk) {
			c.Type, c.Counts = pluginv1.MetricType_METRIC_TYPE_COUNTER, nil
		}, "carries native histogram columns"},
		"deltas without schemas": {func(c *pluginv1.FamilyChunk) { c.NativeSchemas = nil }, "do not match 2 samples"},
	} {
		t.Run(name, func(t *testing.T) {
			b, c := nativeChunk()
			tc.breakIt(c)
			err := wire.Check(b, c)
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
			raw, err := proto.Marshal(b)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	b, c := nativeChunk()
	b.Families = []*pluginv1.FamilyChunk{c}
	raw, _ := proto.Marshal(b)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b pluginv1.Batch
		if proto.Unmarshal(raw, &b) != nil {
			return
		}
		_, _ = wire.Series(&b), wire.Size(&b)
		for _, c := range b.Families {
			ch, err := wire.Open(&b, c)
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

// baselineBatch is the Batch message of the first protocol release
// (proto/baseline/v0.1.0.binpb, api_version 1.0.0): what a host of that
// release decodes a plugin's batch as.
func baselineBatch(t *testing.T) protoreflect.MessageType {
	t.Helper()
	raw, err := os.ReadFile("../../proto/baseline/v0.1.0.binpb")
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet // a buf image is one, with extra fields
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	for _, fd := range set.File {
		if fd.GetPackage() != "plexporter.plugin.v1" {
			continue
		}
		file, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
		if err != nil {
			t.Fatal(err)
		}
		return dynamicpb.NewMessageType(file.Messages().ByName("Batch"))
	}
	t.Fatal("no plexporter.plugin.v1 in the baseline image")
	return nil
}

// A 1.1 plugin's native histograms reach a 1.0 host as classic histograms:
// its decoder skips fields 12 to 19, and what is left is a valid classic
// chunk — the classic buckets when the plugin sent them, else only the
// count and sum (the +Inf bucket). A 1.0 plugin's batch (no native
// columns) is read by this host as classic, as every other test shows.
func TestNativeHistogramsOnAnOldHost(t *testing.T) {
	old := baselineBatch(t)
	if old.Descriptor().Fields().ByNumber(12) != nil {
		t.Fatal("the baseline already has field 12: not the 1.0 protocol")
	}
	for _, b := range batchtest.Natives("o_") {
		raw, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		m := old.New().Interface()
		if err := proto.Unmarshal(raw, m); err != nil {
			t.Fatalf("the 1.0 protocol cannot decode a 1.1 batch: %v", err)
		}
		// What the old host's code can see: the known fields only.
		seen, err := proto.Marshal(dropUnknown(m))
		if err != nil {
			t.Fatal(err)
		}
		var asOld pluginv1.Batch
		if err := proto.Unmarshal(seen, &asOld); err != nil {
			t.Fatal(err)
		}
		for j, c := range asOld.Families {
			ch, err := wire.Open(&asOld, c)
			if err != nil {
				t.Fatalf("chunk %d is malformed for a 1.0 host: %v", j, err)
			}
			if ch.IsNative() || ch.Type() != pluginv1.MetricType_METRIC_TYPE_HISTOGRAM {
				t.Fatalf("chunk %d: native %v, type %v", j, ch.IsNative(), ch.Type())
			}
			orig := b.Families[j]
			if !slices.Equal(c.Counts, orig.Counts) || !slices.Equal(c.Values, orig.Values) ||
				!slices.Equal(c.Bounds, orig.Bounds) || !slices.Equal(c.BucketCounts, orig.BucketCounts) {
				t.Errorf("chunk %d: the classic columns changed on the way: %v, sent %v", j, c, orig)
			}
		}
	}
}

func dropUnknown(m proto.Message) proto.Message {
	r := m.ProtoReflect()
	r.SetUnknown(nil)
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && fd.IsList() {
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message().Interface())
			}
		}
		return true
	})
	return m
}

// The byte budget counts the native columns and the view's index.
func TestSizeCountsNativeColumns(t *testing.T) {
	b, c := nativeChunk()
	b.Families = []*pluginv1.FamilyChunk{c}
	with := wire.Size(b)
	classic := proto.Clone(c).(*pluginv1.FamilyChunk)
	classic.NativeSchemas, classic.NativeZeroThresholds, classic.NativeZeroCounts = nil, nil, nil
	classic.NativePositiveSpanCounts, classic.NativeNegativeSpanCounts = nil, nil
	classic.NativeSpanOffsets, classic.NativeSpanLengths, classic.NativeDeltas = nil, nil, nil
	b.Families = []*pluginv1.FamilyChunk{classic}
	// 2 schemas, 4 span counts, 2 offsets, 2 lengths: 4 bytes each; 2 zero
	// thresholds, 2 zero counts, 3 deltas: 8 each; the index of 2(2+1) uint32.
	if want := 4*(2+4+2+2) + 8*(2+2+3) + 8*3; with-wire.Size(b) != want {
		t.Errorf("native columns count %d bytes, want %d", with-wire.Size(b), want)
	}
}

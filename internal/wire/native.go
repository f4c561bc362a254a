package wire

import (
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Native is one sample's native histogram, read from a chunk's native_*
// columns (the proto's FamilyChunk, fields 12 to 19). The slices alias the
// batch: do not modify them. The sample's count and sum are Chunk.Count and
// Chunk.Value, as for a classic histogram.
type Native struct {
	Schema        int32
	ZeroThreshold float64
	ZeroCount     uint64
	// The positive and negative buckets as client_model has them: spans
	// (an offset and a length each, paired by index) and one count delta
	// per bucket of the spans, each against the previous bucket of the
	// same sign (the first against 0).
	PositiveOffsets []int32
	PositiveLengths []uint32
	PositiveDeltas  []int64
	NegativeOffsets []int32
	NegativeLengths []uint32
	NegativeDeltas  []int64
}

// IsNative reports whether every sample of the chunk carries a native
// histogram (a histogram chunk of protocol 1.1 with native columns); a
// chunk is either all native or all classic. Classic buckets may be there
// too: Chunk.Buckets, with Bounds empty when there are none.
func (c Chunk) IsNative() bool { return c.native != nil }

// Native returns sample i's native histogram. It must only be called on a
// chunk that IsNative. It allocates nothing: the sample's spans and deltas
// were located once, when the chunk was opened.
func (c Chunk) Native(i int) Native {
	x := c.c
	span, delta := c.native[2*i], c.native[2*i+1]
	np, nn := x.NativePositiveSpanCounts[i], x.NativeNegativeSpanCounts[i]
	pb := sum32(x.NativeSpanLengths[span : span+np])
	nb := c.native[2*i+3] - delta - pb
	return Native{
		Schema:          x.NativeSchemas[i],
		ZeroThreshold:   x.NativeZeroThresholds[i],
		ZeroCount:       x.NativeZeroCounts[i],
		PositiveOffsets: x.NativeSpanOffsets[span : span+np],
		PositiveLengths: x.NativeSpanLengths[span : span+np],
		PositiveDeltas:  x.NativeDeltas[delta : delta+pb],
		NegativeOffsets: x.NativeSpanOffsets[span+np : span+np+nn],
		NegativeLengths: x.NativeSpanLengths[span+np : span+np+nn],
		NegativeDeltas:  x.NativeDeltas[delta+pb : delta+pb+nb],
	}
}

// nativeIndex returns, for a checked native chunk of n samples, 2(n+1)
// offsets: sample i's first span at [2i] and first delta at [2i+1] (sample
// n's being the columns' ends), so that Native finds any sample without
// walking the ones before it. It is the one allocation a native chunk costs,
// made once per chunk, never per sample; nil for any other chunk.
//
// Check has made sure the span counts add up to the span columns and the
// lengths to the deltas, so every offset is in range, and the totals fit in
// uint32 because they are lengths of slices decoded from one message.
func nativeIndex(c *pluginv1.FamilyChunk) []uint32 {
	n := len(c.NativeSchemas)
	if n == 0 {
		return nil
	}
	idx := make([]uint32, 2*(n+1))
	var span, delta uint32
	for i := range n {
		idx[2*i], idx[2*i+1] = span, delta
		ns := c.NativePositiveSpanCounts[i] + c.NativeNegativeSpanCounts[i]
		delta += sum32(c.NativeSpanLengths[span : span+ns])
		span += ns
	}
	idx[2*n], idx[2*n+1] = span, delta
	return idx
}

func sum32(v []uint32) uint32 {
	var s uint32
	for _, x := range v {
		s += x
	}
	return s
}

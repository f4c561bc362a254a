package wire

import (
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Reset empties chunk c for reuse, keeping the memory of every column, so
// a producer that recycles sent chunks (the SDK's Writer) appends into them
// without allocating again. It lives next to Check so a column added to
// FamilyChunk is handled in one place.
func Reset(c *pluginv1.FamilyChunk) {
	*c = pluginv1.FamilyChunk{
		LabelNames:     c.LabelNames[:0],
		LabelValues:    c.LabelValues[:0],
		Values:         c.Values[:0],
		Counts:         c.Counts[:0],
		Bounds:         c.Bounds[:0],
		BucketCounts:   c.BucketCounts[:0],
		QuantileValues: c.QuantileValues[:0],

		NativeSchemas:            c.NativeSchemas[:0],
		NativeZeroThresholds:     c.NativeZeroThresholds[:0],
		NativeZeroCounts:         c.NativeZeroCounts[:0],
		NativePositiveSpanCounts: c.NativePositiveSpanCounts[:0],
		NativeNegativeSpanCounts: c.NativeNegativeSpanCounts[:0],
		NativeSpanOffsets:        c.NativeSpanOffsets[:0],
		NativeSpanLengths:        c.NativeSpanLengths[:0],
		NativeDeltas:             c.NativeDeltas[:0],
	}
}

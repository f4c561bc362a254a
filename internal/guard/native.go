package guard

import (
	"fmt"
	"math"

	"github.com/plexporter/plexporter/internal/wire"
)

// Native histogram schemas Prometheus knows: each power of two split into
// 2^schema buckets, from 1/16 (-4) to 256 (8). Others may come; until then
// a scraper cannot place the buckets of one.
const (
	MinNativeSchema = -4
	MaxNativeSchema = 8
)

// checkNative applies the guard's native histogram rules to sample i of a
// native chunk (wire.Chunk.IsNative): the schema in [MinNativeSchema,
// MaxNativeSchema], a zero threshold that is a finite number of at least 0,
// every span after a side's first with an offset (a gap) of at least 0,
// every bucket's count reconstructed from the deltas at least 0, and the
// zero bucket and all buckets adding up to the count — exactly, or at most
// when the sum is NaN (a NaN observation counts in no bucket) — which is
// Prometheus's own histogram validation. How many deltas the spans
// address is the chunk's shape, checked when it was opened (malformed).
// It returns "" for a valid sample, otherwise what is wrong with it.
func checkNative(ch *wire.Chunk, i int) string {
	n := ch.Native(i)
	if n.Schema < MinNativeSchema || n.Schema > MaxNativeSchema {
		return fmt.Sprintf("schema %d outside [%d, %d]", n.Schema, MinNativeSchema, MaxNativeSchema)
	}
	if !(n.ZeroThreshold >= 0) || math.IsInf(n.ZeroThreshold, 1) {
		return fmt.Sprintf("zero threshold %v is not a finite number of at least 0", n.ZeroThreshold)
	}
	total := n.ZeroCount
	for _, side := range [2]struct {
		name    string
		offsets []int32
		deltas  []int64
	}{{"positive", n.PositiveOffsets, n.PositiveDeltas}, {"negative", n.NegativeOffsets, n.NegativeDeltas}} {
		for j, off := range side.offsets {
			if j > 0 && off < 0 {
				return fmt.Sprintf("%s span %d has offset %d: a later span's offset is a gap, at least 0", side.name, j, off)
			}
		}
		count := int64(0)
		for j, d := range side.deltas {
			next := count + d
			// Overflow in either direction makes next's sign wrong.
			if (d > 0 && next < count) || (d < 0 && next > count) || next < 0 {
				return fmt.Sprintf("%s bucket %d: count negative (or out of range) from the deltas", side.name, j)
			}
			count = next
			if total += uint64(count); total < uint64(count) {
				return "bucket counts add up past 2^64"
			}
		}
	}
	if c := ch.Count(i); total != c && !(math.IsNaN(ch.Value(i)) && total < c) {
		return fmt.Sprintf("zero bucket and buckets hold %d observations, but the count is %d", total, c)
	}
	return ""
}

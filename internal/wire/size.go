package wire

import (
	"unsafe"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// seriesPerSample is how many series one sample of a chunk of type t with
// nb bounds exposes (see Chunk.SeriesPerSample).
func seriesPerSample(t pluginv1.MetricType, nb int) int {
	switch t {
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		return nb + 3
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		return nb + 2
	}
	return 1
}

// Series is the number of series batch b carries, as Prometheus counts them
// (Chunk.Series). A native histogram counts as its classic series (B + 3,
// what text scrapers get), whatever its native buckets: that is what a 1.0
// host counts for the same batch. It needs no valid shape: a malformed chunk counts what its
// sample column says, which is what a limit has to count before the guard
// has looked at it.
func Series(b *pluginv1.Batch) int {
	n := 0
	for _, c := range b.GetFamilies() {
		n += len(c.Values) * seriesPerSample(c.Type, len(c.Bounds))
	}
	return n
}

// Sizes of the decoded messages' fixed parts.
const (
	batchSize = int(unsafe.Sizeof(pluginv1.Batch{}))
	chunkSize = int(unsafe.Sizeof(pluginv1.FamilyChunk{})) + 8 // and its pointer
	entrySize = int(unsafe.Sizeof([]byte(nil)))
)

// Size is about how many bytes of host memory batch b holds once decoded:
// its structs, its string table (a slice header and the bytes per entry)
// and its packed columns. It is what the byte budget of Limits counts: what
// decoding cost, not the wire size, which for empty strings or small
// indexes is up to 12 times smaller.
func Size(b *pluginv1.Batch) int {
	n := batchSize + len(b.GetStrings())*entrySize
	for _, s := range b.GetStrings() {
		n += len(s)
	}
	for _, c := range b.GetFamilies() {
		n += chunkSize +
			4*(len(c.LabelNames)+len(c.LabelValues)) +
			8*(len(c.Values)+len(c.Counts)+len(c.Bounds)+len(c.BucketCounts)+len(c.QuantileValues)) +
			4*(len(c.NativeSchemas)+len(c.NativePositiveSpanCounts)+len(c.NativeNegativeSpanCounts)+
				len(c.NativeSpanOffsets)+len(c.NativeSpanLengths)) +
			8*(len(c.NativeZeroThresholds)+len(c.NativeZeroCounts)+len(c.NativeDeltas))
		if k := len(c.NativeSchemas); k > 0 {
			n += 8 * (k + 1) // the chunk view's native index (nativeIndex)
		}
	}
	return n
}

package wire

import (
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Chunk is a read-only view of one family chunk of a batch: the only code in
// the module that knows how the packed columns are laid out. Get one from
// Open, which checks the chunk first; the accessors then never index out of
// range and allocate nothing, so they can sit on the merge's and the
// encoders' per-sample paths.
//
// A Chunk is a small value (three pointers and a few lengths); copy it freely.
// It does not copy the batch: the batch must not change while views of it
// are in use. The strings it returns share the string table's memory
// (TableString) and stay valid as long as they are held.
//
// The view does not check that strings are valid UTF-8: that is the
// guard's job (internal/guard), done once per string-table entry.
type Chunk struct {
	b      *pluginv1.Batch
	c      *pluginv1.FamilyChunk
	nl, nb int // labels per sample, bounds (buckets or quantiles) per sample
	// native locates each sample's spans and deltas in a native histogram
	// chunk (see nativeIndex); nil in every other chunk.
	native []uint32
}

// Open checks chunk c of batch b (see Check) and returns a view of it.
func Open(b *pluginv1.Batch, c *pluginv1.FamilyChunk) (Chunk, error) {
	if err := Check(b, c); err != nil {
		return Chunk{}, err
	}
	return Chunk{b: b, c: c, nl: len(c.LabelNames), nb: len(c.Bounds), native: nativeIndex(c)}, nil
}

// Name is the family name.
func (c Chunk) Name() string { return TableString(c.b.Strings[c.c.Name]) }

// Help is the family's help text.
func (c Chunk) Help() string { return TableString(c.b.Strings[c.c.Help]) }

// Unit is the family's unit, or "".
func (c Chunk) Unit() string { return TableString(c.b.Strings[c.c.Unit]) }

// Type is the family's metric type.
func (c Chunk) Type() pluginv1.MetricType { return c.c.Type }

// Len is the number of samples in the chunk.
func (c Chunk) Len() int { return len(c.c.Values) }

// NumLabels is the number of label names, the same for every sample.
func (c Chunk) NumLabels() int { return c.nl }

// LabelName returns the j-th label name.
func (c Chunk) LabelName(j int) string { return TableString(c.b.Strings[c.c.LabelNames[j]]) }

// LabelValue returns the value of label j of sample i.
func (c Chunk) LabelValue(i, j int) string {
	return TableString(c.b.Strings[c.c.LabelValues[i*c.nl+j]])
}

// LabelRefs returns the string-table indexes of sample i's label values, one
// per label name. Two samples of one batch have the same value exactly when
// they have the same index, so callers that cache per string (the guard's
// UTF-8 check) or compare label sets work on these and resolve them with
// String. The slice aliases the batch: do not modify it.
func (c Chunk) LabelRefs(i int) []uint32 { return c.c.LabelValues[i*c.nl : i*c.nl+c.nl] }

// String resolves a string-table index from LabelRefs.
func (c Chunk) String(ref uint32) string { return TableString(c.b.Strings[ref]) }

// NumStrings is the size of the batch's string table; every LabelRefs
// index is below it.
func (c Chunk) NumStrings() int { return len(c.b.Strings) }

// Value is the value of sample i: the sample itself for a counter, gauge or
// untyped family, the sum of observations for a histogram or summary.
func (c Chunk) Value(i int) float64 { return c.c.Values[i] }

// Count is the observation count of sample i of a histogram or summary (the
// count of its implicit +Inf bucket). Other types have no counts.
func (c Chunk) Count(i int) uint64 { return c.c.Counts[i] }

// Buckets returns a histogram's finite upper bounds, ascending and shared by
// every sample of the chunk, and sample i's cumulative count for each of
// them. The +Inf bucket is not included: its count is Count(i). The slices
// alias the batch: do not modify them.
func (c Chunk) Buckets(i int) (bounds []float64, cumulative []uint64) {
	return c.c.Bounds, c.c.BucketCounts[i*c.nb : i*c.nb+c.nb]
}

// Bounds returns what every sample of the chunk shares: a histogram's
// finite upper bounds or a summary's quantiles (nil for other types). The
// slice aliases the batch: do not modify it.
func (c Chunk) Bounds() []float64 { return c.c.Bounds }

// Quantiles returns a summary's quantiles, shared by every sample of the
// chunk, and sample i's value for each of them. The slices alias the batch:
// do not modify them.
func (c Chunk) Quantiles(i int) (quantiles, values []float64) {
	return c.c.Bounds, c.c.QuantileValues[i*c.nb : i*c.nb+c.nb]
}

// SeriesPerSample is how many series one sample of the chunk exposes, as
// Prometheus counts them: a histogram is its buckets, +Inf, _sum and _count;
// a summary its quantiles, _sum and _count; anything else one series.
func (c Chunk) SeriesPerSample() int { return seriesPerSample(c.c.Type, c.nb) }

// Series is the number of series the whole chunk exposes.
func (c Chunk) Series() int { return c.Len() * c.SeriesPerSample() }

// The chunk's columns that say which series it holds, for a caller that
// recognises a chunk whose series are those of a chunk of an earlier batch
// (the push's flatten): equal string tables, name, label names, label
// values (and bounds, Keep) mean the same series. The slices alias the
// batch: do not modify them.

// StringTable is the batch's string table, which every index resolves in.
func (c Chunk) StringTable() [][]byte { return c.b.Strings }

// NameRef is the string-table index of the family name.
func (c Chunk) NameRef() uint32 { return c.c.Name }

// LabelNameRefs are the string-table indexes of the label names.
func (c Chunk) LabelNameRefs() []uint32 { return c.c.LabelNames }

// AllLabelRefs are the label-value indexes of every sample, sample after
// sample (LabelRefs of each in turn).
func (c Chunk) AllLabelRefs() []uint32 { return c.c.LabelValues }

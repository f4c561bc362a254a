package wire

import (
	"errors"
	"fmt"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// knownType reports whether t is one of the five Prometheus metric types
// (METRIC_TYPE_UNSPECIFIED is not).
func knownType(t pluginv1.MetricType) bool {
	switch t {
	case pluginv1.MetricType_METRIC_TYPE_COUNTER, pluginv1.MetricType_METRIC_TYPE_GAUGE,
		pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, pluginv1.MetricType_METRIC_TYPE_SUMMARY,
		pluginv1.MetricType_METRIC_TYPE_UNTYPED:
		return true
	}
	return false
}

// errStringTable is the one shape error that cannot name a family: without
// a valid string table there is no name to give.
var errStringTable = errors.New("batch string table must start with the empty string")

// Check validates the shape of chunk c against its batch b: every string
// index in range of the string table, a known metric type, and every packed
// column as long as the sample count (len(values)) and the chunk's label
// and bucket counts say. It says nothing about names or label values; that
// is the host's guard. A chunk that passes can be read with a Chunk view
// without any index going out of range.
func Check(b *pluginv1.Batch, c *pluginv1.FamilyChunk) error {
	strs := b.GetStrings()
	ns := uint32(len(strs))
	if ns == 0 || len(strs[0]) != 0 {
		return errStringTable
	}
	if c.Name >= ns {
		return fmt.Errorf("family chunk: name index %d out of range of the %d-entry string table", c.Name, ns)
	}
	name := TableString(strs[c.Name])
	if c.Help >= ns || c.Unit >= ns {
		return fmt.Errorf("family %s: help or unit index out of range of the %d-entry string table", name, ns)
	}
	if !knownType(c.Type) {
		return fmt.Errorf("family %s: unknown type %d", name, c.Type)
	}
	n, nl, nb := len(c.Values), len(c.LabelNames), len(c.Bounds)
	for _, i := range c.LabelNames {
		if i >= ns {
			return fmt.Errorf("family %s: label name index %d out of range of the %d-entry string table", name, i, ns)
		}
	}
	if len(c.LabelValues) != n*nl {
		return fmt.Errorf("family %s: %d label values for %d samples of %d labels", name, len(c.LabelValues), n, nl)
	}
	for _, i := range c.LabelValues {
		if i >= ns {
			return fmt.Errorf("family %s: label value index %d out of range of the %d-entry string table", name, i, ns)
		}
	}
	if c.Type != pluginv1.MetricType_METRIC_TYPE_HISTOGRAM && hasNativeColumns(c) {
		return fmt.Errorf("family %s: %s chunk carries native histogram columns", name, c.Type)
	}
	switch c.Type {
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		if len(c.Counts) != n || len(c.BucketCounts) != n*nb || len(c.QuantileValues) != 0 {
			return fmt.Errorf("family %s: histogram columns do not match %d samples of %d buckets", name, n, nb)
		}
		if err := checkNative(c, n); err != nil {
			return fmt.Errorf("family %s: %w", name, err)
		}
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		if len(c.Counts) != n || len(c.QuantileValues) != n*nb || len(c.BucketCounts) != 0 {
			return fmt.Errorf("family %s: summary columns do not match %d samples of %d quantiles", name, n, nb)
		}
	default:
		if len(c.Counts)+len(c.Bounds)+len(c.BucketCounts)+len(c.QuantileValues) != 0 {
			return fmt.Errorf("family %s: %s chunk carries histogram or summary columns", name, c.Type)
		}
	}
	return nil
}

// hasNativeColumns reports whether any native histogram column of c is set.
func hasNativeColumns(c *pluginv1.FamilyChunk) bool {
	return len(c.NativeSchemas)+len(c.NativeZeroThresholds)+len(c.NativeZeroCounts)+
		len(c.NativePositiveSpanCounts)+len(c.NativeNegativeSpanCounts)+
		len(c.NativeSpanOffsets)+len(c.NativeSpanLengths)+len(c.NativeDeltas) != 0
}

// checkNative checks the native histogram columns of a histogram chunk of n
// samples: all empty (a classic chunk), or one schema, zero threshold, zero
// count and pair of span counts per sample, as many span offsets and
// lengths as the span counts add up to, and as many deltas as the span
// lengths add up to. The sums are taken in uint64, so no count a plugin
// sends can wrap them. The values themselves (schema range, span gaps,
// bucket counts against the count) are the guard's (internal/guard): a
// chunk that passes here is only safe to read.
func checkNative(c *pluginv1.FamilyChunk, n int) error {
	if !hasNativeColumns(c) {
		return nil
	}
	if len(c.NativeSchemas) != n || len(c.NativeZeroThresholds) != n || len(c.NativeZeroCounts) != n ||
		len(c.NativePositiveSpanCounts) != n || len(c.NativeNegativeSpanCounts) != n {
		return fmt.Errorf("native histogram columns (schemas %d, zero thresholds %d, zero counts %d, span counts %d and %d) do not match %d samples",
			len(c.NativeSchemas), len(c.NativeZeroThresholds), len(c.NativeZeroCounts),
			len(c.NativePositiveSpanCounts), len(c.NativeNegativeSpanCounts), n)
	}
	var spans uint64
	for i := range n {
		spans += uint64(c.NativePositiveSpanCounts[i]) + uint64(c.NativeNegativeSpanCounts[i])
	}
	if spans != uint64(len(c.NativeSpanOffsets)) || spans != uint64(len(c.NativeSpanLengths)) {
		return fmt.Errorf("native histogram span counts add up to %d spans, but there are %d span offsets and %d span lengths",
			spans, len(c.NativeSpanOffsets), len(c.NativeSpanLengths))
	}
	var buckets uint64
	for _, l := range c.NativeSpanLengths {
		buckets += uint64(l)
	}
	if buckets != uint64(len(c.NativeDeltas)) {
		return fmt.Errorf("native histogram span lengths add up to %d buckets, but there are %d deltas", buckets, len(c.NativeDeltas))
	}
	return nil
}

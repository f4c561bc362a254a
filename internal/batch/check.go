package batch

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
	switch c.Type {
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		if len(c.Counts) != n || len(c.BucketCounts) != n*nb || len(c.QuantileValues) != 0 {
			return fmt.Errorf("family %s: histogram columns do not match %d samples of %d buckets", name, n, nb)
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

// Package dtoconv turns columnar batches back into client_model metric
// families. It is the reference path: sdktest renders goldens through it and
// expfmt, and the host uses it for the protobuf exposition. It is not the
// host's fast text path (see host/internal/expose).
package dtoconv

import (
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

var dtoType = map[pluginv1.MetricType]dto.MetricType{
	pluginv1.MetricType_METRIC_TYPE_COUNTER:   dto.MetricType_COUNTER,
	pluginv1.MetricType_METRIC_TYPE_GAUGE:     dto.MetricType_GAUGE,
	pluginv1.MetricType_METRIC_TYPE_HISTOGRAM: dto.MetricType_HISTOGRAM,
	pluginv1.MetricType_METRIC_TYPE_SUMMARY:   dto.MetricType_SUMMARY,
	pluginv1.MetricType_METRIC_TYPE_UNTYPED:   dto.MetricType_UNTYPED,
}

// Families converts batches into families, joining chunks of the same
// family in order of appearance. It fails on a malformed batch.
func Families(batches []*pluginv1.Batch) ([]*dto.MetricFamily, error) {
	var out []*dto.MetricFamily
	byName := map[string]*dto.MetricFamily{}
	for _, b := range batches {
		for _, c := range b.GetFamilies() {
			if err := Check(b, c); err != nil {
				return nil, err
			}
			name := b.Strings[c.Name]
			mf := byName[name]
			if mf == nil {
				mf = &dto.MetricFamily{Name: proto.String(name), Help: proto.String(b.Strings[c.Help]), Type: dtoType[c.Type].Enum()}
				if u := b.Strings[c.Unit]; u != "" {
					mf.Unit = proto.String(u)
				}
				byName[name] = mf
				out = append(out, mf)
			}
			mf.Metric = append(mf.Metric, Metrics(b, c)...)
		}
	}
	return out, nil
}

// Samples returns the number of samples in a chunk whose shape is valid.
func Samples(c *pluginv1.FamilyChunk) int { return len(c.Values) }

// Check validates a chunk's shape against its batch: string indexes in
// range, and every column as long as the sample count says.
func Check(b *pluginv1.Batch, c *pluginv1.FamilyChunk) error {
	ns := uint32(len(b.Strings))
	if ns == 0 || b.Strings[0] != "" {
		return fmt.Errorf("batch string table must start with the empty string")
	}
	if c.Name >= ns || c.Help >= ns || c.Unit >= ns {
		return fmt.Errorf("family chunk: name/help/unit index out of range")
	}
	name := b.Strings[c.Name]
	if _, ok := dtoType[c.Type]; !ok {
		return fmt.Errorf("family %s: unknown type %d", name, c.Type)
	}
	n, nl, nb := len(c.Values), len(c.LabelNames), len(c.Bounds)
	for _, i := range c.LabelNames {
		if i >= ns {
			return fmt.Errorf("family %s: label name index out of range", name)
		}
	}
	if len(c.LabelValues) != n*nl {
		return fmt.Errorf("family %s: %d label values for %d samples of %d labels", name, len(c.LabelValues), n, nl)
	}
	for _, i := range c.LabelValues {
		if i >= ns {
			return fmt.Errorf("family %s: label value index out of range", name)
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
			return fmt.Errorf("family %s: %s chunk carries histogram columns", name, c.Type)
		}
	}
	return nil
}

// Metrics converts the samples of one checked chunk.
func Metrics(b *pluginv1.Batch, c *pluginv1.FamilyChunk) []*dto.Metric {
	n, nl, nb := len(c.Values), len(c.LabelNames), len(c.Bounds)
	out := make([]*dto.Metric, n)
	for i := range n {
		out[i] = Metric(b, c, i, nl, nb)
	}
	return out
}

// Metric converts sample i of a checked chunk.
func Metric(b *pluginv1.Batch, c *pluginv1.FamilyChunk, i, nl, nb int) *dto.Metric {
	m := &dto.Metric{}
	if nl > 0 {
		m.Label = make([]*dto.LabelPair, nl)
		for j := range nl {
			m.Label[j] = &dto.LabelPair{Name: proto.String(b.Strings[c.LabelNames[j]]), Value: proto.String(b.Strings[c.LabelValues[i*nl+j]])}
		}
	}
	v := c.Values[i]
	switch c.Type {
	case pluginv1.MetricType_METRIC_TYPE_COUNTER:
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	case pluginv1.MetricType_METRIC_TYPE_GAUGE:
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	case pluginv1.MetricType_METRIC_TYPE_UNTYPED:
		m.Untyped = &dto.Untyped{Value: proto.Float64(v)}
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		h := &dto.Histogram{SampleCount: proto.Uint64(c.Counts[i]), SampleSum: proto.Float64(v)}
		h.Bucket = make([]*dto.Bucket, 0, nb+1)
		for j := range nb {
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(c.Bounds[j]), CumulativeCount: proto.Uint64(c.BucketCounts[i*nb+j])})
		}
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(math.Inf(1)), CumulativeCount: proto.Uint64(c.Counts[i])})
		m.Histogram = h
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		s := &dto.Summary{SampleCount: proto.Uint64(c.Counts[i]), SampleSum: proto.Float64(v)}
		for j := range nb {
			s.Quantile = append(s.Quantile, &dto.Quantile{Quantile: proto.Float64(c.Bounds[j]), Value: proto.Float64(c.QuantileValues[i*nb+j])})
		}
		m.Summary = s
	}
	return m
}

// Type returns the client_model type of a protocol metric type.
func Type(t pluginv1.MetricType) dto.MetricType { return dtoType[t] }

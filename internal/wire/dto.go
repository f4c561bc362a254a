package wire

import (
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// This file converts batches to client_model metric families: the reference
// path that sdktest renders goldens through (with expfmt) and that the
// host's protobuf writer is tested against. It is not a hot path.

// DTOType returns the client_model type of a protocol metric type.
// METRIC_TYPE_UNSPECIFIED, which Check refuses, maps to untyped.
func DTOType(t pluginv1.MetricType) dto.MetricType {
	switch t {
	case pluginv1.MetricType_METRIC_TYPE_COUNTER:
		return dto.MetricType_COUNTER
	case pluginv1.MetricType_METRIC_TYPE_GAUGE:
		return dto.MetricType_GAUGE
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		return dto.MetricType_HISTOGRAM
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		return dto.MetricType_SUMMARY
	}
	return dto.MetricType_UNTYPED
}

// Families converts batches into client_model families, joining chunks of
// the same family in order of appearance. It fails on the first malformed
// chunk (see Check).
func Families(batches []*pluginv1.Batch) ([]*dto.MetricFamily, error) {
	var out []*dto.MetricFamily
	byName := map[string]*dto.MetricFamily{}
	for _, b := range batches {
		for _, c := range b.GetFamilies() {
			ch, err := Open(b, c)
			if err != nil {
				return nil, err
			}
			mf := byName[ch.Name()]
			if mf == nil {
				mf = &dto.MetricFamily{Name: proto.String(ch.Name()), Help: proto.String(ch.Help()), Type: DTOType(ch.Type()).Enum()}
				if u := ch.Unit(); u != "" {
					mf.Unit = proto.String(u)
				}
				byName[ch.Name()] = mf
				out = append(out, mf)
			}
			for i := range ch.Len() {
				mf.Metric = append(mf.Metric, ch.Metric(i))
			}
		}
	}
	return out, nil
}

// Metric converts sample i to a client_model metric. A histogram gets its
// +Inf bucket explicitly, as client_golang's Gather returns it.
func (c Chunk) Metric(i int) *dto.Metric {
	m := &dto.Metric{}
	if c.nl > 0 {
		m.Label = make([]*dto.LabelPair, c.nl)
		for j := range c.nl {
			m.Label[j] = &dto.LabelPair{Name: proto.String(c.LabelName(j)), Value: proto.String(c.LabelValue(i, j))}
		}
	}
	v := c.Value(i)
	switch c.Type() {
	case pluginv1.MetricType_METRIC_TYPE_COUNTER:
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	case pluginv1.MetricType_METRIC_TYPE_GAUGE:
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	case pluginv1.MetricType_METRIC_TYPE_UNTYPED:
		m.Untyped = &dto.Untyped{Value: proto.Float64(v)}
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		bounds, cum := c.Buckets(i)
		h := &dto.Histogram{SampleCount: proto.Uint64(c.Count(i)), SampleSum: proto.Float64(v)}
		// A native histogram without classic buckets has no bucket list at
		// all, as client_golang writes one: an explicit +Inf bucket would
		// read as a classic histogram beside it to a scraper that takes both.
		if !c.IsNative() || len(bounds) > 0 {
			h.Bucket = make([]*dto.Bucket, 0, len(bounds)+1)
			for j, ub := range bounds {
				h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(ub), CumulativeCount: proto.Uint64(cum[j])})
			}
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(math.Inf(1)), CumulativeCount: proto.Uint64(c.Count(i))})
		}
		if c.IsNative() {
			setNative(h, c.Native(i))
		}
		m.Histogram = h
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		qs, vs := c.Quantiles(i)
		s := &dto.Summary{SampleCount: proto.Uint64(c.Count(i)), SampleSum: proto.Float64(v)}
		for j, q := range qs {
			s.Quantile = append(s.Quantile, &dto.Quantile{Quantile: proto.Float64(q), Value: proto.Float64(vs[j])})
		}
		m.Summary = s
	}
	return m
}

// setNative sets client_model's native histogram fields of h from n.
func setNative(h *dto.Histogram, n Native) {
	h.Schema = proto.Int32(n.Schema)
	h.ZeroThreshold = proto.Float64(n.ZeroThreshold)
	h.ZeroCount = proto.Uint64(n.ZeroCount)
	h.NegativeSpan = dtoSpans(n.NegativeOffsets, n.NegativeLengths)
	h.NegativeDelta = slices.Clone(n.NegativeDeltas)
	h.PositiveSpan = dtoSpans(n.PositiveOffsets, n.PositiveLengths)
	h.PositiveDelta = slices.Clone(n.PositiveDeltas)
	if NeedsNoopSpan(n) {
		h.PositiveSpan = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
}

// NeedsNoopSpan reports whether a native histogram is exposed with
// client_model's no-op span (offset 0, length 0): without spans, a zero
// threshold or a zero count, it would read as a classic histogram without
// buckets (client_model's metrics.proto, positive_span).
func NeedsNoopSpan(n Native) bool {
	return len(n.PositiveOffsets) == 0 && len(n.NegativeOffsets) == 0 && n.ZeroThreshold == 0 && n.ZeroCount == 0
}

func dtoSpans(offsets []int32, lengths []uint32) []*dto.BucketSpan {
	if len(offsets) == 0 {
		return nil
	}
	spans := make([]*dto.BucketSpan, len(offsets))
	for j := range offsets {
		spans[j] = &dto.BucketSpan{Offset: proto.Int32(offsets[j]), Length: proto.Uint32(lengths[j])}
	}
	return spans
}

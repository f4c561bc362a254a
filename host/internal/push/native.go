package push

import (
	"slices"
	"time"

	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/wire"
)

// A native histogram (wire.Chunk.IsNative) is one series, named as its
// family, with one histogram sample: what Prometheus ingests from a
// protobuf scrape with scrape_classic_histograms off (the default), the
// classic buckets a plugin may serve with it left out. The wire carries
// integer histograms only (counts, deltas), so every histogram pushed is
// an integer one, and never a gauge histogram (the wire has no such type).

// histOf is sample n of a chunk (count, sum) as remote write 1.0's
// histogram, the fields Prometheus's own remote write fills
// (prompb.FromIntHistogram), the spans and deltas copied: they point into
// a plugin's batch.
func histOf(n wire.Native, count uint64, sum float64, ts int64) *prompb.Histogram {
	return &prompb.Histogram{
		Count:          &prompb.Histogram_CountInt{CountInt: count},
		Sum:            sum,
		Schema:         n.Schema,
		ZeroThreshold:  n.ZeroThreshold,
		ZeroCount:      &prompb.Histogram_ZeroCountInt{ZeroCountInt: n.ZeroCount},
		NegativeSpans:  spansOf(n.NegativeOffsets, n.NegativeLengths),
		NegativeDeltas: slices.Clone(n.NegativeDeltas),
		PositiveSpans:  spansOf(n.PositiveOffsets, n.PositiveLengths),
		PositiveDeltas: slices.Clone(n.PositiveDeltas),
		Timestamp:      ts,
	}
}

func spansOf(offsets []int32, lengths []uint32) []prompb.BucketSpan {
	if len(offsets) == 0 {
		return nil
	}
	s := make([]prompb.BucketSpan, len(offsets))
	for i := range offsets {
		s[i] = prompb.BucketSpan{Offset: offsets[i], Length: lengths[i]}
	}
	return s
}

// staleHist is the staleness marker of a native histogram series as
// Prometheus writes it (its TSDB appends a histogram whose sum is
// value.StaleNaN, and remote write sends it as FromIntHistogram does).
func staleHist(ts int64) *prompb.Histogram {
	return &prompb.Histogram{
		Count:     &prompb.Histogram_CountInt{},
		Sum:       staleNaN,
		ZeroCount: &prompb.Histogram_ZeroCountInt{},
		Timestamp: ts,
	}
}

// histAt returns the histogram of b's sample i (series id, value v), nil
// when the sample is a float one: the snapshot's native histogram, or the
// staleness marker of a series that was a native histogram. p.mu is held.
func (p *Pusher) histAt(b *snapshot, i int, id uint32, v float64) *prompb.Histogram {
	if h, ok := b.natives[i]; ok {
		return h
	}
	if value.IsStaleNaN(v) && p.tab.info[id].role == roleNative {
		return staleHist(b.ts)
	}
	return nil
}

// rw2Hist is h as remote write 2.0's histogram (the same fields).
func rw2Hist(h *prompb.Histogram) *writev2.Histogram {
	return &writev2.Histogram{
		Count:          &writev2.Histogram_CountInt{CountInt: h.GetCountInt()},
		Sum:            h.Sum,
		Schema:         h.Schema,
		ZeroThreshold:  h.ZeroThreshold,
		ZeroCount:      &writev2.Histogram_ZeroCountInt{ZeroCountInt: h.GetZeroCountInt()},
		NegativeSpans:  rw2Spans(h.NegativeSpans),
		NegativeDeltas: h.NegativeDeltas,
		PositiveSpans:  rw2Spans(h.PositiveSpans),
		PositiveDeltas: h.PositiveDeltas,
		Timestamp:      h.Timestamp,
	}
}

func rw2Spans(s []prompb.BucketSpan) []*writev2.BucketSpan {
	if len(s) == 0 {
		return nil
	}
	out := make([]*writev2.BucketSpan, len(s))
	for i := range s {
		out[i] = &writev2.BucketSpan{Offset: s[i].Offset, Length: s[i].Length}
	}
	return out
}

// expPoint is h as an OTLP exponential histogram data point, as the
// OpenTelemetry Prometheus compatibility specification maps a native
// histogram (and the Collector's Prometheus receiver does): scale is the
// schema; Prometheus's bucket i is (base^(i-1), base^i], OpenTelemetry's
// (base^i, base^(i+1)], so a side's offset is its first bucket's index
// minus 1; the counts are absolute, the gaps between spans zeros. start
// is the data point's start time (ms).
func expPoint(h *prompb.Histogram, ts, start int64) *metricspb.ExponentialHistogramDataPoint {
	dp := &metricspb.ExponentialHistogramDataPoint{
		TimeUnixNano:      uint64(ts) * uint64(time.Millisecond),
		StartTimeUnixNano: uint64(start) * uint64(time.Millisecond),
		Count:             h.GetCountInt(),
		Sum:               proto.Float64(h.Sum),
		Scale:             h.Schema,
		ZeroCount:         h.GetZeroCountInt(),
		ZeroThreshold:     h.ZeroThreshold,
		Positive:          expBuckets(h.PositiveSpans, h.PositiveDeltas),
		Negative:          expBuckets(h.NegativeSpans, h.NegativeDeltas),
	}
	return dp
}

// expBuckets are the dense buckets of spans and deltas (nil: none).
func expBuckets(spans []prompb.BucketSpan, deltas []int64) *metricspb.ExponentialHistogramDataPoint_Buckets {
	if len(deltas) == 0 {
		return nil
	}
	b := &metricspb.ExponentialHistogramDataPoint_Buckets{}
	var count int64
	d := 0
	for si, s := range spans {
		if si == 0 {
			b.Offset = s.Offset - 1
		} else {
			for range s.Offset { // a gap: empty buckets
				b.BucketCounts = append(b.BucketCounts, 0)
			}
		}
		for range s.Length {
			count += deltas[d]
			d++
			b.BucketCounts = append(b.BucketCounts, uint64(count))
		}
	}
	return b
}

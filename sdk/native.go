package sdk

import (
	"fmt"
	"math"

	"github.com/plexporter/plexporter/internal/wire"
)

// NativeHistogram is one sample of a Prometheus native histogram: buckets
// of exponentially growing width on both sides of a zero bucket, addressed
// by index (schema 0: bucket i holds observations in (2^(i-1), 2^i]). It may
// carry classic buckets beside the native ones, for scrapers that only read
// the text format or OpenMetrics 1.0 (which have no native histograms).
// Write it with Writer.NativeHistogram to a family declared Histogram.
type NativeHistogram struct {
	Count uint64  // observations, every bucket's and the zero bucket's
	Sum   float64 // of the observations

	// Schema is the resolution, -4 to 8: each power of two is divided into
	// 2^Schema buckets.
	Schema int32
	// ZeroThreshold is the zero bucket's half-width (at least 0):
	// observations in [-ZeroThreshold, ZeroThreshold] count in ZeroCount.
	ZeroThreshold float64
	ZeroCount     uint64

	// The populated buckets above and below zero: spans of consecutive
	// bucket indexes, and each bucket's count (absolute, not a delta), as
	// many as the spans' lengths add up to. SetPositiveBuckets fills them
	// from a dense array.
	PositiveSpans   []BucketSpan
	PositiveBuckets []uint64
	NegativeSpans   []BucketSpan
	NegativeBuckets []uint64

	// Optional classic buckets, as Writer.Histogram takes them: finite
	// upper bounds in ascending order and the cumulative count of each (the
	// +Inf bucket is Count). Without them, text and OpenMetrics scrapers see
	// only _sum, _count and the +Inf bucket.
	Bounds     []float64
	Cumulative []uint64
}

// BucketSpan is a run of consecutive native buckets. The first span's
// Offset is the index of its first bucket; a later span's Offset is the
// number of empty buckets between it and the previous span (at least 0).
type BucketSpan struct {
	Offset int32
	Length uint32
}

// maxSpanGap is the longest run of empty buckets SetPositiveBuckets keeps
// inside a span rather than starting a new one: a span costs two numbers,
// an empty bucket one (client_golang makes the same trade).
const maxSpanGap = 2

// SetPositiveBuckets sets the positive buckets from counts, the count of
// bucket index first+i at counts[i], dropping empty buckets at either end
// and starting a new span after more than two empty ones. A collector that
// counts into a fixed array of bucket indexes (as eBPF programs do) hands
// it over as is.
func (h *NativeHistogram) SetPositiveBuckets(first int32, counts []uint64) {
	h.PositiveSpans, h.PositiveBuckets = h.PositiveSpans[:0], h.PositiveBuckets[:0]
	gap := int32(0)   // empty buckets since the last populated one
	last := int32(-1) // index in counts of the last bucket kept
	for i, c := range counts {
		if c == 0 {
			gap++
			continue
		}
		switch {
		case last < 0:
			h.PositiveSpans = append(h.PositiveSpans, BucketSpan{Offset: first + int32(i)})
		case gap > maxSpanGap:
			h.PositiveSpans = append(h.PositiveSpans, BucketSpan{Offset: gap})
		default:
			for range gap {
				h.PositiveBuckets = append(h.PositiveBuckets, 0)
			}
			h.PositiveSpans[len(h.PositiveSpans)-1].Length += uint32(gap)
		}
		h.PositiveBuckets = append(h.PositiveBuckets, c)
		h.PositiveSpans[len(h.PositiveSpans)-1].Length++
		last, gap = int32(i), 0
	}
}

// NativeHistogram writes one native histogram sample (and its classic
// buckets, when h has them) of a family declared Histogram. Native and
// classic-only samples of one family may be mixed; they travel in separate
// chunks. A malformed h (see check) is not written and is reported as a
// partial error of the collector "sdk".
func (w *Writer) NativeHistogram(d *Desc, h NativeHistogram, labelValues ...string) {
	if err := h.check(); err != nil {
		w.misuse(d, fmt.Errorf("native histogram %s: %w", d.Name, err))
		return
	}
	c := w.chunk(d, Histogram, labelValues, h.Bounds, true)
	if c == nil {
		return
	}
	w.spanOffsets, w.spanLengths = w.spanOffsets[:0], w.spanLengths[:0]
	for _, spans := range [2][]BucketSpan{h.PositiveSpans, h.NegativeSpans} {
		for _, s := range spans {
			w.spanOffsets = append(w.spanOffsets, s.Offset)
			w.spanLengths = append(w.spanLengths, s.Length)
		}
	}
	w.enc.AddNative(c, labelValues, &wire.NativeSample{
		Sum: h.Sum, Count: h.Count, Cumulative: h.Cumulative,
		Schema: h.Schema, ZeroThreshold: h.ZeroThreshold, ZeroCount: h.ZeroCount,
		PositiveSpans: len(h.PositiveSpans), NegativeSpans: len(h.NegativeSpans),
		SpanOffsets: w.spanOffsets, SpanLengths: w.spanLengths,
		PositiveBuckets: h.PositiveBuckets, NegativeBuckets: h.NegativeBuckets,
	})
}

// check applies the host's rules for native histograms (docs/plugin-protocol.md,
// What the host checks) before the sample is written, so that a plugin's
// own tests see the mistake where it was made, with its reason.
func (h *NativeHistogram) check() error {
	switch {
	case len(h.Bounds) != len(h.Cumulative):
		return fmt.Errorf("%d bounds but %d bucket counts", len(h.Bounds), len(h.Cumulative))
	case h.Schema < -4 || h.Schema > 8:
		return fmt.Errorf("schema %d outside [-4, 8]", h.Schema)
	case !(h.ZeroThreshold >= 0) || math.IsInf(h.ZeroThreshold, 1):
		return fmt.Errorf("zero threshold %v is not a finite number of at least 0", h.ZeroThreshold)
	}
	total := h.ZeroCount
	for _, side := range []struct {
		name    string
		spans   []BucketSpan
		buckets []uint64
	}{{"positive", h.PositiveSpans, h.PositiveBuckets}, {"negative", h.NegativeSpans, h.NegativeBuckets}} {
		n := uint64(0)
		for j, s := range side.spans {
			if j > 0 && s.Offset < 0 {
				return fmt.Errorf("%s span %d has offset %d: a later span's offset is a gap, at least 0", side.name, j, s.Offset)
			}
			n += uint64(s.Length)
		}
		if n != uint64(len(side.buckets)) {
			return fmt.Errorf("%s spans cover %d buckets but %d counts are given", side.name, n, len(side.buckets))
		}
		for _, c := range side.buckets {
			total += c
		}
	}
	if total != h.Count && !(math.IsNaN(h.Sum) && total < h.Count) {
		return fmt.Errorf("buckets and zero bucket hold %d observations but the count is %d", total, h.Count)
	}
	return nil
}

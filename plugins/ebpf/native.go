package main

import (
	"math"

	"github.com/plexporter/plexporter/sdk"
)

// writeLatency writes one latency histogram as the programs count it —
// cumulative counts per classic bound, and the count — with the native
// histogram beside the classic buckets when native is set and the bounds
// are schema 0 buckets (the defaults are: schema0Bound). Text and
// OpenMetrics scrapers keep reading the classic buckets either way; an
// override with other bounds has no exact native form and is written
// classic only.
func writeLatency(w *sdk.Writer, native bool, d *sdk.Desc, bounds []float64, cumulative []uint64, count uint64, sum float64, labels ...string) {
	first, ok := schema0Start(bounds)
	if !native || !ok {
		w.Histogram(d, bounds, cumulative, count, sum, labels...)
		return
	}
	w.NativeHistogram(d, schema0Native(first, bounds, cumulative, count, sum), labels...)
}

// schema0Start reports whether bounds are consecutive schema 0 bucket upper
// bounds, 2^first, 2^(first+1), …, and returns first.
func schema0Start(bounds []float64) (int, bool) {
	if len(bounds) == 0 {
		return 0, false
	}
	frac, exp := math.Frexp(bounds[0]) // bounds[0] = frac × 2^exp, frac in [0.5, 1)
	first := exp - 1
	if frac != 0.5 {
		return 0, false
	}
	for i, b := range bounds {
		if b != schema0Bound(first+i) {
			return 0, false
		}
	}
	return first, true
}

// schema0Native converts the classic buckets of schema 0 bounds starting at
// 2^first into a schema 0 native histogram with those classic buckets
// beside it. The first classic bucket holds every latency up to 2^first,
// [0, 2^first]: that is the native zero bucket with threshold 2^first,
// exactly. Classic bucket i > 0 is native bucket first+i exactly. Latencies
// above the last bound (the +Inf bucket) go to the native bucket right
// above it, (2^last, 2^(last+1)]: the one approximation, for latencies
// longer than the histogram was made for (16 s by default).
func schema0Native(first int, bounds []float64, cumulative []uint64, count uint64, sum float64) sdk.NativeHistogram {
	h := sdk.NativeHistogram{
		Count: count, Sum: sum, Schema: 0,
		ZeroThreshold: bounds[0], ZeroCount: cumulative[0],
		Bounds: bounds, Cumulative: cumulative,
	}
	perBucket := make([]uint64, len(bounds)) // native buckets first+1 … last+1
	for i := 1; i < len(bounds); i++ {
		perBucket[i-1] = cumulative[i] - cumulative[i-1]
	}
	perBucket[len(bounds)-1] = count - cumulative[len(bounds)-1]
	h.SetPositiveBuckets(int32(first+1), perBucket)
	return h
}

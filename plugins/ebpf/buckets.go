package main

import (
	"fmt"
	"math"
)

// maxBounds is the most finite bounds a histogram may have: MAX_BOUNDS in
// bpf/common.h, the size of the programs' bound and bucket arrays.
const maxBounds = 32

// The default latency buckets are the Prometheus native histogram schema 0
// buckets from 2^-20 s (about 1 µs) to 2^4 s (16 s): bucket index i counts
// latencies in (2^(i-1), 2^i] seconds. The BPF programs count bucket
// indexes, so the same counts can later also be exposed as a native
// histogram (schema 0, offset minDefaultExp) without a second histogram.
const (
	minDefaultExp = -20
	maxDefaultExp = 4
)

// schema0Bound is the upper bound, in seconds, of native histogram schema 0
// bucket index idx: the one place an index turns into a bound.
func schema0Bound(idx int) float64 { return math.Ldexp(1, idx) }

// defaultBounds returns the default bucket bounds in seconds.
func defaultBounds() []float64 {
	out := make([]float64, 0, maxDefaultExp-minDefaultExp+1)
	for i := minDefaultExp; i <= maxDefaultExp; i++ {
		out = append(out, schema0Bound(i))
	}
	return out
}

// boundsNanoseconds converts bounds in seconds to the integer nanosecond
// thresholds the programs compare latencies with. A latency of v ns is at
// most b seconds exactly when v <= floor(b * 1e9), so the floor keeps the
// classic buckets exact.
func boundsNanoseconds(bounds []float64) [maxBounds]uint64 {
	var out [maxBounds]uint64
	for i, b := range bounds {
		out[i] = uint64(math.Floor(b * 1e9))
	}
	return out
}

// validateBounds checks a bucket override: 1 to maxBounds finite bounds,
// positive, strictly increasing, and at least a nanosecond apart (the
// programs' resolution). key names the config key in the error.
func validateBounds(key string, bounds []float64) error {
	if len(bounds) == 0 {
		return fmt.Errorf("%s: empty; leave the key out for the default buckets", key)
	}
	if len(bounds) > maxBounds {
		return fmt.Errorf("%s: %d bounds, at most %d are supported", key, len(bounds), maxBounds)
	}
	ns := boundsNanoseconds(bounds)
	for i, b := range bounds {
		switch {
		case math.IsNaN(b) || math.IsInf(b, 0):
			return fmt.Errorf("%s[%d]: %v is not a finite number of seconds", key, i, b)
		case b <= 0:
			return fmt.Errorf("%s[%d]: %v is not positive", key, i, b)
		case b < 1e-9:
			return fmt.Errorf("%s[%d]: %v is below the programs' resolution of one nanosecond", key, i, b)
		case i > 0 && b <= bounds[i-1]:
			return fmt.Errorf("%s[%d]: %v is not above the previous bound %v (bounds must be strictly increasing)", key, i, b, bounds[i-1])
		case i > 0 && ns[i] == ns[i-1]:
			return fmt.Errorf("%s[%d]: %v is within the same nanosecond as the previous bound %v", key, i, b, bounds[i-1])
		}
	}
	return nil
}

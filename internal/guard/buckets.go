package guard

import (
	"fmt"
	"math"
	"slices"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// checkBounds checks what a histogram's or summary's samples share: a
// histogram's finite upper bounds must be strictly ascending, without NaN
// or +Inf (the +Inf bucket is the count; an explicit one would be written
// twice), and a summary's quantiles must lie in [0, 1] and differ from each
// other (a repeated one is a repeated series). A chunk that fails is
// dropped whole: there is no telling which bucket the plugin meant.
func checkBounds(ch wire.Chunk) (string, error) {
	bounds := ch.Bounds()
	switch ch.Type() {
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		for j, b := range bounds {
			if math.IsNaN(b) || math.IsInf(b, 1) || (j > 0 && !(b > bounds[j-1])) {
				return ReasonInvalidHistogram, fmt.Errorf("family %s: bucket bounds %v are not strictly ascending finite numbers", ch.Name(), bounds)
			}
		}
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		ascending := true
		for j, q := range bounds {
			if !(q >= 0 && q <= 1) { // NaN too
				return ReasonInvalidSummary, fmt.Errorf("family %s: quantile %v outside [0, 1]", ch.Name(), q)
			}
			ascending = ascending && (j == 0 || q > bounds[j-1])
		}
		// Quantiles need no order; only a repeated one is a problem. The
		// copy is made only for the rare summary whose quantiles are not
		// written in ascending order.
		if !ascending {
			sorted := slices.Clone(bounds)
			slices.Sort(sorted)
			for j := 1; j < len(sorted); j++ {
				if sorted[j] == sorted[j-1] {
					return ReasonInvalidSummary, fmt.Errorf("family %s: quantile %v given twice", ch.Name(), sorted[j])
				}
			}
		}
	}
	return "", nil
}

// cumulative reports whether histogram sample i's bucket counts are
// cumulative: never decreasing, and none above the sample's count (the
// +Inf bucket).
func cumulative(ch *wire.Chunk, i int) bool {
	_, cum := ch.Buckets(i)
	prev := uint64(0)
	for _, c := range cum {
		if c < prev {
			return false
		}
		prev = c
	}
	return prev <= ch.Count(i)
}

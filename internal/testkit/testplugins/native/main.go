// Command native is a test-only plugin (never shipped) that writes one
// native histogram of a fixed distribution, with classic buckets beside it,
// so that a real Prometheus scraping the host can be asked what the
// distribution implies (host/native_prometheus_test.go).
//
// Collect number k writes native_latency_seconds with k times the
// distribution below, so the histogram grows like a real one and rate()
// over it is k-independent: 20 observations in (0.25, 0.5] s, 30 in
// (0.5, 1] and 50 in (1, 2] — schema 0 bucket indexes -1, 0 and 1. Half of
// the observations are at most 1 s, so histogram_quantile(0.5, ...) is
// exactly 1 (a bucket boundary, whatever the interpolation inside a
// bucket), and 0.2 is exactly 0.5.
package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/plexporter/plexporter/sdk"
)

var latency = sdk.NewDesc("native_latency_seconds", sdk.Histogram, "A fixed latency distribution, as a native histogram with classic buckets.").WithUnit("seconds")

// perCollect is the distribution one collect adds, by schema 0 bucket index
// from firstIndex; classicBounds are those buckets' upper bounds.
var (
	perCollect    = []uint64{20, 30, 50}
	classicBounds = []float64{0.5, 1, 2}
)

const firstIndex = -1

// sumPerCollect is the sum of one collect's observations, each at the
// middle of its bucket: 20×0.375 + 30×0.75 + 50×1.5.
const sumPerCollect = 20*0.375 + 30*0.75 + 50*1.5

type plugin struct{ collects atomic.Uint64 }

func (p *plugin) Info() sdk.Info {
	return sdk.Info{Name: strings.TrimPrefix(filepath.Base(os.Args[0]), "plexporter-"), Version: "0.0.1-test", Metrics: []*sdk.Desc{latency}}
}

func (p *plugin) Configure(context.Context, sdk.Config) error { return nil }

func (p *plugin) Collect(_ context.Context, w *sdk.Writer) error {
	k := p.collects.Add(1)
	counts := make([]uint64, len(perCollect))
	h := sdk.NativeHistogram{Schema: 0, Sum: sumPerCollect * float64(k)}
	for i, c := range perCollect {
		counts[i] = c * k
		h.Count += c * k
		h.Cumulative = append(h.Cumulative, h.Count)
	}
	h.SetPositiveBuckets(firstIndex, counts)
	h.Bounds = classicBounds
	w.NativeHistogram(latency, h)
	return nil
}

func main() { sdk.Serve(&plugin{}) }

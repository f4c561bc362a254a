// Package batchtest builds batches with the SDK writer for tests and
// benchmarks: Record for hand-written fixtures, Mix for a synthetic
// node-shaped workload. (The performance harness's workload is
// internal/dev/bench/workload.)
package batchtest

import (
	"fmt"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Record runs fn against an unfiltered SDK writer and returns the batches it
// produced. Partial errors fn records are not kept; use wire.Recorder
// for those, or for a filter or prefix.
func Record(fn func(w *sdk.Writer)) []*pluginv1.Batch {
	var rec wire.Recorder
	w := sdktest.NewWriter(nil, "", rec.Send)
	fn(w)
	if err := w.Flush(); err != nil {
		panic(err) // Recorder.Send never fails
	}
	return rec.Batches
}

// Mix writes n series shaped like a typical node: counters and gauges with
// 2–3 labels and 10-bucket histograms, in the proportion 6:3:1.
func Mix(prefix string, n int) []*pluginv1.Batch {
	ctr := sdk.NewDesc(prefix+"rx_bytes_total", sdk.Counter, "Bytes received.", "device", "port", "queue")
	gauge := sdk.NewDesc(prefix+"link_speed_bytes", sdk.Gauge, "Link speed.", "device", "port")
	hist := sdk.NewDesc(prefix+"latency_seconds", sdk.Histogram, "Latency.", "device", "op")
	bounds := []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}
	cum := make([]uint64, len(bounds))
	return Record(func(w *sdk.Writer) {
		for i := range n {
			dev, port := fmt.Sprintf("mlx5_%d", i/1000), fmt.Sprintf("%d", i%1000)
			switch i % 10 {
			case 0:
				for j := range cum {
					cum[j] = uint64(i + j*3)
				}
				w.Histogram(hist, bounds, cum, uint64(i+40), float64(i)*0.37, dev, port)
			case 1, 2, 3:
				w.Gauge(gauge, 1.25e11, dev, port)
			default:
				w.Counter(ctr, float64(i)*1234.5, dev, port, fmt.Sprintf("q%d", i%7))
			}
		}
	})
}

// Natives writes native histograms of every shape the protocol carries, in
// the family <prefix>native_seconds: native only, native with classic
// buckets beside it, negative and zero buckets, a gap between spans, and
// an empty one (no observations, zero threshold 0: exposed with a no-op
// span); and a classic-only sample of the same family, which travels in its
// own chunk.
func Natives(prefix string) []*pluginv1.Batch {
	d := sdk.NewDesc(prefix+"native_seconds", sdk.Histogram, "Native latency.", "op").WithUnit("seconds")
	return Record(func(w *sdk.Writer) {
		var only sdk.NativeHistogram
		only.SetPositiveBuckets(-3, []uint64{1, 4, 0, 0, 0, 2, 3}) // two spans: the gap of 3 splits them
		only.Count, only.Sum = 10, 1.75
		w.NativeHistogram(d, only, "only")
		w.NativeHistogram(d, sdk.NativeHistogram{Schema: -4}, "empty")
		w.NativeHistogram(d, sdk.NativeHistogram{
			Count: 7, Sum: -0.5, Schema: 3, ZeroThreshold: 1e-9, ZeroCount: 2,
			PositiveSpans: []sdk.BucketSpan{{Offset: 0, Length: 2}}, PositiveBuckets: []uint64{3, 1},
			NegativeSpans: []sdk.BucketSpan{{Offset: -1, Length: 1}}, NegativeBuckets: []uint64{1},
			Bounds: []float64{0, 1}, Cumulative: []uint64{3, 6},
		}, "both")
		w.Histogram(d, []float64{0.5}, []uint64{1}, 2, 0.75, "classic")
	})
}

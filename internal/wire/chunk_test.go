package wire_test

import (
	"math"
	"slices"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
)

var (
	gaugeDesc   = sdk.NewDesc("t_temp_celsius", sdk.Gauge, "Temperature.", "dev", "sensor").WithUnit("celsius")
	histDesc    = sdk.NewDesc("t_latency_seconds", sdk.Histogram, "Latency.", "op")
	summaryDesc = sdk.NewDesc("t_rtt_seconds", sdk.Summary, "RTT.")
)

// views opens every chunk of batches.
func views(t *testing.T, batches []*pluginv1.Batch) map[string]wire.Chunk {
	t.Helper()
	out := map[string]wire.Chunk{}
	for _, b := range batches {
		for _, c := range b.Families {
			ch, err := wire.Open(b, c)
			if err != nil {
				t.Fatal(err)
			}
			out[ch.Name()] = ch
		}
	}
	return out
}

func TestChunkView(t *testing.T) {
	chunks := views(t, batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(gaugeDesc, 41.5, "nvme0", "composite")
		w.Gauge(gaugeDesc, math.Inf(-1), "nvme1", "")
		w.Histogram(histDesc, []float64{0.1, 1}, []uint64{2, 5}, 7, 3.25, "read")
		w.Histogram(histDesc, []float64{0.1, 1}, []uint64{0, 1}, 1, 0.5, "write")
		w.Summary(summaryDesc, []float64{0.5, 0.99}, []float64{0.2, 0.9}, 10, 4)
	}))

	g := chunks["t_temp_celsius"]
	if g.Type() != pluginv1.MetricType_METRIC_TYPE_GAUGE || g.Help() != "Temperature." || g.Unit() != "celsius" {
		t.Errorf("gauge metadata: type %v help %q unit %q", g.Type(), g.Help(), g.Unit())
	}
	if g.Len() != 2 || g.NumLabels() != 2 || g.LabelName(0) != "dev" || g.LabelName(1) != "sensor" {
		t.Fatalf("gauge shape: %d samples, labels %d %q %q", g.Len(), g.NumLabels(), g.LabelName(0), g.LabelName(1))
	}
	if g.LabelValue(1, 0) != "nvme1" || g.LabelValue(1, 1) != "" || g.LabelValue(0, 1) != "composite" {
		t.Errorf("gauge label values: %q %q %q", g.LabelValue(1, 0), g.LabelValue(1, 1), g.LabelValue(0, 1))
	}
	refs := g.LabelRefs(0)
	if len(refs) != 2 || g.String(refs[0]) != "nvme0" || g.String(refs[1]) != "composite" || int(refs[1]) >= g.NumStrings() {
		t.Errorf("gauge label refs %v", refs)
	}
	if g.Value(0) != 41.5 || !math.IsInf(g.Value(1), -1) {
		t.Errorf("gauge values %v %v", g.Value(0), g.Value(1))
	}
	if g.SeriesPerSample() != 1 || g.Series() != 2 {
		t.Errorf("gauge series %d per sample, %d in all", g.SeriesPerSample(), g.Series())
	}

	h := chunks["t_latency_seconds"]
	bounds, cum := h.Buckets(1)
	if !slices.Equal(bounds, []float64{0.1, 1}) || !slices.Equal(cum, []uint64{0, 1}) {
		t.Errorf("histogram buckets of sample 1: %v %v", bounds, cum)
	}
	if _, cum := h.Buckets(0); !slices.Equal(cum, []uint64{2, 5}) {
		t.Errorf("histogram buckets of sample 0: %v", cum)
	}
	if h.Count(0) != 7 || h.Value(0) != 3.25 || h.LabelValue(1, 0) != "write" {
		t.Errorf("histogram sample: count %d sum %v op %q", h.Count(0), h.Value(0), h.LabelValue(1, 0))
	}
	// Prometheus counts 2 buckets + le="+Inf" + _sum + _count.
	if h.SeriesPerSample() != 5 || h.Series() != 10 {
		t.Errorf("histogram series %d per sample, %d in all", h.SeriesPerSample(), h.Series())
	}

	s := chunks["t_rtt_seconds"]
	qs, vs := s.Quantiles(0)
	if !slices.Equal(qs, []float64{0.5, 0.99}) || !slices.Equal(vs, []float64{0.2, 0.9}) || s.Count(0) != 10 || s.Value(0) != 4 {
		t.Errorf("summary: %v %v count %d sum %v", qs, vs, s.Count(0), s.Value(0))
	}
	// 2 quantiles + _sum + _count.
	if s.SeriesPerSample() != 4 || s.NumLabels() != 0 || len(s.LabelRefs(0)) != 0 {
		t.Errorf("summary: %d series per sample, %d labels", s.SeriesPerSample(), s.NumLabels())
	}
}

// The view sits on the merge's and encoders' per-sample paths.
func TestChunkViewDoesNotAllocate(t *testing.T) {
	chunks := views(t, batchtest.Mix("a_", 100))
	var sink float64
	for name, ch := range chunks {
		allocs := testing.AllocsPerRun(100, func() {
			for i := range ch.Len() {
				for j, ref := range ch.LabelRefs(i) {
					sink += float64(len(ch.String(ref)) + len(ch.LabelValue(i, j)) + len(ch.LabelName(j)))
				}
				sink += ch.Value(i) + float64(ch.SeriesPerSample())
				if ch.Type() == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM {
					bounds, cum := ch.Buckets(i)
					sink += bounds[0] + float64(cum[0]+ch.Count(i))
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per pass over the chunk, want 0", name, allocs)
		}
	}
	_ = sink
}

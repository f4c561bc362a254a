package wire_test

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
)

func TestFamilies(t *testing.T) {
	first := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(gaugeDesc, 1, "d0", "s")
		w.Histogram(histDesc, []float64{1}, []uint64{1}, 2, 1.5, "read")
	})
	second := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(gaugeDesc, 2, "d1", "s")
		w.Summary(summaryDesc, []float64{0.5}, []float64{0.25}, 3, 0.75)
	})
	got, err := wire.Families(append(first, second...))
	if err != nil {
		t.Fatal(err)
	}
	want := []*dto.MetricFamily{
		{Name: proto.String("t_temp_celsius"), Help: proto.String("Temperature."), Type: dto.MetricType_GAUGE.Enum(), Unit: proto.String("celsius"), Metric: []*dto.Metric{
			{Label: []*dto.LabelPair{{Name: proto.String("dev"), Value: proto.String("d0")}, {Name: proto.String("sensor"), Value: proto.String("s")}}, Gauge: &dto.Gauge{Value: proto.Float64(1)}},
			{Label: []*dto.LabelPair{{Name: proto.String("dev"), Value: proto.String("d1")}, {Name: proto.String("sensor"), Value: proto.String("s")}}, Gauge: &dto.Gauge{Value: proto.Float64(2)}},
		}},
		{Name: proto.String("t_latency_seconds"), Help: proto.String("Latency."), Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{
			{Label: []*dto.LabelPair{{Name: proto.String("op"), Value: proto.String("read")}}, Histogram: &dto.Histogram{
				SampleCount: proto.Uint64(2), SampleSum: proto.Float64(1.5),
				Bucket: []*dto.Bucket{{UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(1)}, {UpperBound: proto.Float64(math.Inf(1)), CumulativeCount: proto.Uint64(2)}},
			}},
		}},
		{Name: proto.String("t_rtt_seconds"), Help: proto.String("RTT."), Type: dto.MetricType_SUMMARY.Enum(), Metric: []*dto.Metric{
			{Summary: &dto.Summary{SampleCount: proto.Uint64(3), SampleSum: proto.Float64(0.75), Quantile: []*dto.Quantile{{Quantile: proto.Float64(0.5), Value: proto.Float64(0.25)}}}},
		}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d families, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("family %d:\n got %s\nwant %s", i, prototext.Format(got[i]), prototext.Format(want[i]))
		}
	}
}

func TestFamiliesRefusesMalformed(t *testing.T) {
	b := batchtest.Record(func(w *sdk.Writer) { w.Gauge(gaugeDesc, 1, "d0", "s") })
	b[0].Families[0].Values = append(b[0].Families[0].Values, 2) // a sample without labels
	if _, err := wire.Families(b); err == nil {
		t.Fatal("malformed chunk converted")
	}
}

func TestDTOType(t *testing.T) {
	for typ, want := range map[pluginv1.MetricType]dto.MetricType{
		pluginv1.MetricType_METRIC_TYPE_COUNTER:   dto.MetricType_COUNTER,
		pluginv1.MetricType_METRIC_TYPE_GAUGE:     dto.MetricType_GAUGE,
		pluginv1.MetricType_METRIC_TYPE_HISTOGRAM: dto.MetricType_HISTOGRAM,
		pluginv1.MetricType_METRIC_TYPE_SUMMARY:   dto.MetricType_SUMMARY,
		pluginv1.MetricType_METRIC_TYPE_UNTYPED:   dto.MetricType_UNTYPED,
	} {
		if got := wire.DTOType(typ); got != want {
			t.Errorf("DTOType(%v) = %v, want %v", typ, got, want)
		}
	}
}

package wire_test

import (
	"errors"
	"testing"

	"github.com/plexporter/plexporter/internal/wire"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/metricfilter"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestRecorder(t *testing.T) {
	filter, err := metricfilter.New([]string{"t_temp_celsius"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rec wire.Recorder
	w := sdktest.NewWriter(filter, "", rec.Send)
	for i := range sdk.DefaultBatchSamples + 1 {
		w.Gauge(gaugeDesc, float64(i), "d", "s"+string(rune('a'+i%26)))
	}
	w.Histogram(histDesc, nil, nil, 1, 1, "filtered out")
	w.Error("probe", errors.New("sensor gone"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(rec.Batches) != 2 {
		t.Fatalf("%d batches, want 2 (one full, one with the last sample)", len(rec.Batches))
	}
	if len(rec.Errors) != 1 || rec.Errors[0].GetCollector() != "probe" {
		t.Fatalf("errors %v", rec.Errors)
	}
	samples := 0
	for name, ch := range views(t, rec.Batches[1:]) {
		if name != "t_temp_celsius" {
			t.Errorf("family %s passed the filter", name)
		}
		samples += ch.Len()
	}
	if samples != 1 {
		t.Errorf("%d samples in the last batch, want 1", samples)
	}
}

package main

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// scrape is one Collect's samples keyed `name{l="v",...}` (labels sorted),
// with histograms as their _count, _sum and _bucket samples.
type scrape struct {
	samples map[string]float64
	errors  []*pluginv1.CollectError
	text    string
}

func collect(t *testing.T, c pluginv1.PluginServiceClient) scrape {
	t.Helper()
	res := sdktest.Collect(t, c, 0)
	if res.Status != nil {
		t.Fatalf("collect: %v", res.Status)
	}
	s := scrape{samples: map[string]float64{}, errors: res.Errors, text: res.Text(t)}
	for _, mf := range res.Families(t) {
		for _, m := range mf.GetMetric() {
			key := func(suffix string, extra ...string) string {
				return seriesKeyOf(mf.GetName()+suffix, m.GetLabel(), extra...)
			}
			switch {
			case m.Histogram != nil:
				h := m.GetHistogram()
				s.samples[key("_count")] = float64(h.GetSampleCount())
				s.samples[key("_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					s.samples[key("_bucket", fmt.Sprintf("le=%q", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
			case m.Counter != nil:
				s.samples[key("")] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.samples[key("")] = m.GetGauge().GetValue()
			}
		}
	}
	return s
}

func seriesKeyOf(name string, labels []*dto.LabelPair, extra ...string) string {
	parts := append([]string(nil), extra...)
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// get returns a sample, failing the test when it is absent.
func (s scrape) get(t *testing.T, key string) float64 {
	t.Helper()
	v, ok := s.samples[key]
	if !ok {
		t.Fatalf("no sample %s in:\n%s", key, s.text)
	}
	return v
}

// or0 returns a sample, 0 when it is absent (a series not yet created).
func (s scrape) or0(key string) float64 { return s.samples[key] }

func (s scrape) errorText() string {
	var out []string
	for _, e := range s.errors {
		out = append(out, e.GetCollector()+": "+e.GetMessage())
	}
	return strings.Join(out, "\n")
}

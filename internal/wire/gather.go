package wire

import (
	"fmt"
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// WriteFamilies writes client_model metric families (the output of any
// prometheus.Gatherer) with e, each family named prefix + its name, those
// allow selects (by that name; nil: all). It is the bridge for
// client_golang code: sdk.Writer.WriteFamilies, and the host's runtime
// families (go_*, process_*, plexporter_build_info). Native histogram parts
// and exemplars are not carried; a family of a type the protocol lacks is
// recorded as a partial error of the collector "gather".
func WriteFamilies(e *Encoder, mfs []*dto.MetricFamily, prefix string, allow func(name string) bool) {
	headers := map[string]*Header{}
	for _, mf := range mfs {
		typ, ok := dtoTypes[mf.GetType()]
		if !ok {
			e.Error("gather", fmt.Sprintf("family %s: unsupported metric type %s", mf.GetName(), mf.GetType()))
			continue
		}
		if allow != nil && !allow(prefix+mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			if e.SendErr() != nil {
				return
			}
			h := headerFor(headers, prefix, mf, typ, m)
			lv := make([]string, len(m.GetLabel()))
			for i, lp := range m.GetLabel() {
				lv[i] = lp.GetValue()
			}
			switch typ {
			case pluginv1.MetricType_METRIC_TYPE_COUNTER:
				e.AddValue(e.Open(h, nil, false), lv, m.GetCounter().GetValue())
			case pluginv1.MetricType_METRIC_TYPE_GAUGE:
				e.AddValue(e.Open(h, nil, false), lv, m.GetGauge().GetValue())
			case pluginv1.MetricType_METRIC_TYPE_UNTYPED:
				e.AddValue(e.Open(h, nil, false), lv, m.GetUntyped().GetValue())
			case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
				hist := m.GetHistogram()
				var bounds []float64
				var cum []uint64
				for _, b := range hist.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue // the +Inf bucket is the count
					}
					bounds = append(bounds, b.GetUpperBound())
					cum = append(cum, b.GetCumulativeCount())
				}
				e.AddHistogram(e.Open(h, bounds, false), lv, cum, hist.GetSampleCount(), hist.GetSampleSum())
			case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
				s := m.GetSummary()
				qs := make([]float64, len(s.GetQuantile()))
				vs := make([]float64, len(s.GetQuantile()))
				for i, q := range s.GetQuantile() {
					qs[i], vs[i] = q.GetQuantile(), q.GetValue()
				}
				e.AddSummary(e.Open(h, qs, false), lv, vs, s.GetSampleCount(), s.GetSampleSum())
			}
		}
	}
}

var dtoTypes = map[dto.MetricType]pluginv1.MetricType{
	dto.MetricType_COUNTER:         pluginv1.MetricType_METRIC_TYPE_COUNTER,
	dto.MetricType_GAUGE:           pluginv1.MetricType_METRIC_TYPE_GAUGE,
	dto.MetricType_UNTYPED:         pluginv1.MetricType_METRIC_TYPE_UNTYPED,
	dto.MetricType_HISTOGRAM:       pluginv1.MetricType_METRIC_TYPE_HISTOGRAM,
	dto.MetricType_GAUGE_HISTOGRAM: pluginv1.MetricType_METRIC_TYPE_HISTOGRAM,
	dto.MetricType_SUMMARY:         pluginv1.MetricType_METRIC_TYPE_SUMMARY,
}

// headerFor returns the Header of the metric's family and label-name set;
// one family may legally mix label sets in client_model, our chunks may
// not.
func headerFor(cache map[string]*Header, prefix string, mf *dto.MetricFamily, typ pluginv1.MetricType, m *dto.Metric) *Header {
	var key strings.Builder
	key.WriteString(mf.GetName())
	for _, lp := range m.GetLabel() {
		key.WriteByte(0)
		key.WriteString(lp.GetName())
	}
	if h, ok := cache[key.String()]; ok {
		return h
	}
	h := &Header{Name: prefix + mf.GetName(), Type: typ, Help: mf.GetHelp(), Unit: mf.GetUnit()}
	for _, lp := range m.GetLabel() {
		h.Labels = append(h.Labels, lp.GetName())
	}
	cache[key.String()] = h
	return h
}

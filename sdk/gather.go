package sdk

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// WriteFamilies writes client_model metric families (the output of any
// prometheus.Gatherer) into w. It is the bridge for existing
// client_golang code; the host also uses it for its own self-metrics.
// Native histogram parts and exemplars are not carried.
func (w *Writer) WriteFamilies(mfs []*dto.MetricFamily) {
	descs := map[string]*Desc{}
	for _, mf := range mfs {
		typ, ok := dtoTypes[mf.GetType()]
		if !ok {
			w.Error("gather", fmt.Errorf("family %s: unsupported metric type %s", mf.GetName(), mf.GetType()))
			continue
		}
		for _, m := range mf.GetMetric() {
			d := descFor(descs, mf, typ, m)
			if !w.Enabled(d) {
				break
			}
			lv := make([]string, len(m.GetLabel()))
			for i, lp := range m.GetLabel() {
				lv[i] = lp.GetValue()
			}
			switch typ {
			case Counter:
				w.Counter(d, m.GetCounter().GetValue(), lv...)
			case Gauge:
				w.Gauge(d, m.GetGauge().GetValue(), lv...)
			case Untyped:
				w.Untyped(d, m.GetUntyped().GetValue(), lv...)
			case Histogram:
				h := m.GetHistogram()
				var bounds []float64
				var cum []uint64
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue // the +Inf bucket is the count
					}
					bounds = append(bounds, b.GetUpperBound())
					cum = append(cum, b.GetCumulativeCount())
				}
				w.Histogram(d, bounds, cum, h.GetSampleCount(), h.GetSampleSum(), lv...)
			case Summary:
				s := m.GetSummary()
				qs := make([]float64, len(s.GetQuantile()))
				vs := make([]float64, len(s.GetQuantile()))
				for i, q := range s.GetQuantile() {
					qs[i], vs[i] = q.GetQuantile(), q.GetValue()
				}
				w.Summary(d, qs, vs, s.GetSampleCount(), s.GetSampleSum(), lv...)
			}
		}
	}
}

var dtoTypes = map[dto.MetricType]Type{
	dto.MetricType_COUNTER:         Counter,
	dto.MetricType_GAUGE:           Gauge,
	dto.MetricType_UNTYPED:         Untyped,
	dto.MetricType_HISTOGRAM:       Histogram,
	dto.MetricType_GAUGE_HISTOGRAM: Histogram,
	dto.MetricType_SUMMARY:         Summary,
}

// descFor returns a Desc for the metric's family and label-name set; one
// family may legally mix label sets in client_model, our chunks may not.
func descFor(cache map[string]*Desc, mf *dto.MetricFamily, typ Type, m *dto.Metric) *Desc {
	var key strings.Builder
	key.WriteString(mf.GetName())
	for _, lp := range m.GetLabel() {
		key.WriteByte(0)
		key.WriteString(lp.GetName())
	}
	if d, ok := cache[key.String()]; ok {
		return d
	}
	d := &Desc{Name: mf.GetName(), Type: typ, Help: mf.GetHelp(), Unit: mf.GetUnit()}
	for _, lp := range m.GetLabel() {
		d.Labels = append(d.Labels, lp.GetName())
	}
	cache[key.String()] = d
	return d
}

// CollectorPlugin serves existing prometheus.Collector implementations as a
// plugin. It is the convenience path: every collector runs on every scrape
// and disabled families are dropped after the fact, so prefer the Writer for
// expensive sources.
type CollectorPlugin struct {
	info Info
	reg  *prometheus.Registry
}

// NewCollectorPlugin registers cs on a private registry. It fails like
// Registry.Register does (duplicate or inconsistent descriptors).
func NewCollectorPlugin(info Info, cs ...prometheus.Collector) (*CollectorPlugin, error) {
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return &CollectorPlugin{info: info, reg: reg}, nil
}

// Info returns the Info given to NewCollectorPlugin. Without a catalogue
// there, it describes the families the collectors expose right now.
func (p *CollectorPlugin) Info() Info {
	info := p.info
	if len(info.Metrics) > 0 {
		return info
	}
	mfs, _ := p.reg.Gather()
	descs := map[string]*Desc{}
	for _, mf := range mfs {
		typ, ok := dtoTypes[mf.GetType()]
		if !ok || len(mf.GetMetric()) == 0 {
			continue
		}
		info.Metrics = append(info.Metrics, descFor(descs, mf, typ, mf.GetMetric()[0]))
	}
	return info
}

// Configure refuses a config section: a CollectorPlugin has no settings,
// and a key nobody reads is a typo the operator must hear about (protocol
// rule 16). A plugin with settings embeds *CollectorPlugin in its own type
// and defines Configure there, decoding them with Config.Decode.
func (p *CollectorPlugin) Configure(_ context.Context, cfg Config) error {
	keys := slices.Sorted(maps.Keys(cfg.raw.GetFields()))
	if len(keys) == 0 {
		return nil
	}
	name := p.info.Name
	if name == "" {
		name = "<name>"
	}
	what := "unknown key"
	if len(keys) > 1 {
		what = "unknown keys"
	}
	return fmt.Errorf("%s: %s: this plugin takes no settings; remove plugins.%s.config", strings.Join(keys, ", "), what, name)
}

// Collect gathers the registry; a gather error is a partial failure, the
// families that were gathered are still written.
func (p *CollectorPlugin) Collect(_ context.Context, w *Writer) error {
	mfs, err := p.reg.Gather()
	w.WriteFamilies(mfs)
	return err
}

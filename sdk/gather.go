package sdk

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/internal/wire"
)

// WriteFamilies writes client_model metric families (the output of any
// prometheus.Gatherer) into w. It is the bridge for existing
// client_golang code. Native histogram parts and exemplars are not
// carried.
func (w *Writer) WriteFamilies(mfs []*dto.MetricFamily) {
	wire.WriteFamilies(w.enc, mfs, w.prefix, w.filter.Allow)
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

package sdk

import (
	"strconv"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Type is a Prometheus metric type. Its zero value is no type at all: a
// Desc must name one of the constants below.
type Type uint8

// The metric types a plugin can emit.
const (
	Counter Type = iota + 1
	Gauge
	Histogram
	Summary
	Untyped
)

// String returns the type as the text exposition format writes it in a
// # TYPE line ("counter", "gauge", ...).
func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	case Summary:
		return "summary"
	case Untyped:
		return "untyped"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// wire returns the protocol's value for t; an invalid Type maps to
// METRIC_TYPE_UNSPECIFIED, which the host refuses.
func (t Type) wire() pluginv1.MetricType {
	switch t {
	case Counter:
		return pluginv1.MetricType_METRIC_TYPE_COUNTER
	case Gauge:
		return pluginv1.MetricType_METRIC_TYPE_GAUGE
	case Histogram:
		return pluginv1.MetricType_METRIC_TYPE_HISTOGRAM
	case Summary:
		return pluginv1.MetricType_METRIC_TYPE_SUMMARY
	case Untyped:
		return pluginv1.MetricType_METRIC_TYPE_UNTYPED
	}
	return pluginv1.MetricType_METRIC_TYPE_UNSPECIFIED
}

// Desc describes one metric family. Create descriptors once (package
// variables or at Configure) and reuse them on every collect: the Writer keys
// its per-batch state by the pointer.
//
// In Info's catalogue, a Name with a '*' describes families whose names are
// only known at run time (e.g. "rdma_*_total" for one counter per kernel
// file); such a Desc is for the catalogue only, never write samples to it.
type Desc struct {
	Name   string // as exposed: counters end in _total
	Type   Type
	Help   string
	Unit   string // base unit or empty
	Labels []string
	// Shared, in Info's catalogue, says that other plugins write this
	// family too, by design. A family a catalogue declares belongs to that
	// plugin: the host drops any other plugin's series of it, unless every
	// plugin writing it declares it Shared (docs/plugin-protocol.md).
	Shared bool
	// SelectedBy are further names an allowlist or denylist pattern selects
	// the family by, without metric_prefix: the event it is derived from,
	// NIXL style (WithSelectedBy). Not for a Name with a '*'.
	SelectedBy []string
}

// NewDesc returns a descriptor.
func NewDesc(name string, typ Type, help string, labels ...string) *Desc {
	return &Desc{Name: name, Type: typ, Help: help, Labels: labels}
}

// WithUnit sets the unit and returns d, for use in variable declarations.
func (d *Desc) WithUnit(unit string) *Desc { d.Unit = unit; return d }

// WithShared marks d shared (Desc.Shared) and returns it, for use in
// variable declarations.
func (d *Desc) WithShared() *Desc { d.Shared = true; return d }

// WithSelectedBy adds names the host's allowlist and denylist select the
// family by, besides its own, and returns d: NIXL's exporter derives a
// counter, a gauge and a histogram from one event, and its allowlist
// names the event (agent_xfer_time selects agent_xfer_time_total,
// agent_xfer_time and agent_xfer_time_us). The host and the Writer apply
// them alike (metricfilter.Filter.AllowFamily).
func (d *Desc) WithSelectedBy(names ...string) *Desc {
	d.SelectedBy = append(d.SelectedBy, names...)
	return d
}

func (d *Desc) proto() *pluginv1.MetricDescriptor {
	return &pluginv1.MetricDescriptor{Name: d.Name, Type: d.Type.wire(), Help: d.Help, Unit: d.Unit, LabelNames: d.Labels, Shared: d.Shared, SelectedBy: d.SelectedBy}
}

package sdk

import (
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Type is a Prometheus metric type.
type Type = pluginv1.MetricType

// The metric types a plugin can emit.
const (
	Counter   = pluginv1.MetricType_METRIC_TYPE_COUNTER
	Gauge     = pluginv1.MetricType_METRIC_TYPE_GAUGE
	Histogram = pluginv1.MetricType_METRIC_TYPE_HISTOGRAM
	Summary   = pluginv1.MetricType_METRIC_TYPE_SUMMARY
	Untyped   = pluginv1.MetricType_METRIC_TYPE_UNTYPED
)

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
}

// NewDesc returns a descriptor.
func NewDesc(name string, typ Type, help string, labels ...string) *Desc {
	return &Desc{Name: name, Type: typ, Help: help, Labels: labels}
}

// WithUnit sets the unit and returns d, for use in variable declarations.
func (d *Desc) WithUnit(unit string) *Desc { d.Unit = unit; return d }

func (d *Desc) proto() *pluginv1.MetricDescriptor {
	return &pluginv1.MetricDescriptor{Name: d.Name, Type: d.Type, Help: d.Help, Unit: d.Unit, LabelNames: d.Labels}
}

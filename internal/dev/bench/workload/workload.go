// Package workload defines the synthetic series of the performance harness:
// one set of families that a plexporter plugin writes through the SDK
// (Plan.Write) and that an in-process client_golang registry holds
// (Register), value for value, so both sides expose the same series.
//
// n series are 60% counters with 3 labels, 27% gauges with 2 labels and 13%
// in 10-bucket histograms with 2 labels (n/100 histograms of 13 series each:
// 10 buckets, +Inf, _sum, _count), spread evenly over 10 families per kind.
package workload

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plexporter/plexporter/sdk"
)

// FamiliesPerKind is the number of counter, gauge and histogram families each.
const FamiliesPerKind = 10

// Bounds are the finite histogram bucket bounds.
var Bounds = []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}

// observations holds one value per bucket (the last one above every bound),
// so every histogram has cumulative counts 1..10, count 11 and sum histSum.
var (
	observations = func() []float64 {
		out := make([]float64, 0, len(Bounds)+1)
		for _, b := range Bounds {
			out = append(out, b*0.9)
		}
		return append(out, 10)
	}()
	histCum = func() []uint64 {
		out := make([]uint64, len(Bounds))
		for i := range out {
			out[i] = uint64(i + 1)
		}
		return out
	}()
	histSum = func() float64 {
		// Summed in observation order, as client_golang does.
		var s float64
		for _, v := range observations {
			s += v
		}
		return s
	}()
)

var histOps = []string{"read", "write", "getattr", "lookup", "access", "create", "remove", "commit"}

// Counts returns how many counter, gauge and histogram samples make n series.
func Counts(n int) (counters, gauges, histograms int) {
	histograms = n / 100
	gauges = n * 27 / 100
	counters = n - gauges - 13*histograms
	return counters, gauges, histograms
}

// Series returns the number of series Counts(n) makes (n, or close to it).
func Series(n int) int {
	c, g, h := Counts(n)
	return c + g + 13*h
}

// Kind of a family.
type Kind int

// The kinds of families.
const (
	Counter Kind = iota
	Gauge
	Histogram
)

// Family is one synthetic family.
type Family struct {
	Kind   Kind
	Index  int // 0..FamiliesPerKind-1
	Desc   *sdk.Desc
	Labels []string
}

// BaseName is the name an allowlist pattern uses (counters without _total).
func (f *Family) BaseName() string {
	if f.Kind == Counter {
		return f.Desc.Name[:len(f.Desc.Name)-len("_total")]
	}
	return f.Desc.Name
}

// Families returns the 3*FamiliesPerKind families, counters first.
func Families() []*Family {
	var out []*Family
	for _, kind := range []Kind{Counter, Gauge, Histogram} {
		for i := range FamiliesPerKind {
			var d *sdk.Desc
			switch kind {
			case Counter:
				d = sdk.NewDesc(fmt.Sprintf("bench_rx_%d_bytes_total", i), sdk.Counter, fmt.Sprintf("Synthetic counter %d.", i), "device", "port", "queue")
			case Gauge:
				d = sdk.NewDesc(fmt.Sprintf("bench_link_%d_speed_bytes", i), sdk.Gauge, fmt.Sprintf("Synthetic gauge %d.", i), "device", "port")
			case Histogram:
				d = sdk.NewDesc(fmt.Sprintf("bench_op_%d_latency_seconds", i), sdk.Histogram, fmt.Sprintf("Synthetic histogram %d.", i), "device", "op")
			}
			// Shared: configuration C's six bench plugins write every
			// family (each every sixth series), by design; the host drops
			// a family's series from any plugin but its owner otherwise.
			d.WithShared()
			out = append(out, &Family{Kind: kind, Index: i, Desc: d, Labels: d.Labels})
		}
	}
	return out
}

// Allowlist returns the patterns enabling one family of each kind: 10% of
// the families and 10% of the series.
func Allowlist() []string {
	var out []string
	for _, f := range Families() {
		if f.Index == 0 {
			out = append(out, f.BaseName())
		}
	}
	return out
}

// Sample is one series (or one histogram) of a family.
type Sample struct {
	LabelValues []string
	Value       float64 // counter or gauge value; histograms: unused
}

// samples returns family f's samples of n series; with shards > 1 only those
// of shard (sample j of a family belongs to shard j % shards).
func samples(f *Family, n, shard, shards int) []Sample {
	c, g, h := Counts(n)
	total := map[Kind]int{Counter: c, Gauge: g, Histogram: h}[f.Kind]
	// Family i holds the samples k of its kind with k % FamiliesPerKind == i.
	per := total / FamiliesPerKind
	if f.Index < total%FamiliesPerKind {
		per++
	}
	var out []Sample
	for j := range per {
		if shards > 1 && j%shards != shard {
			continue
		}
		var s Sample
		switch f.Kind {
		case Counter:
			s.LabelValues = []string{"mlx5_" + strconv.Itoa(j/64), strconv.Itoa(j/8%8 + 1), "q" + strconv.Itoa(j%8)}
			s.Value = float64(j)*1234567 + float64(f.Index)
		case Gauge:
			s.LabelValues = []string{"mlx5_" + strconv.Itoa(j/16), strconv.Itoa(j%16 + 1)}
			s.Value = float64(j%1000) * 0.25
		case Histogram:
			s.LabelValues = []string{"mlx5_" + strconv.Itoa(j/8), histOps[j%8]}
		}
		out = append(out, s)
	}
	return out
}

// Plan is one plugin's share of n series, precomputed so that Write costs
// what a plugin with its data at hand costs.
type Plan struct {
	fams    []*Family
	samples [][]Sample
}

// NewPlan returns shard `shard` of `shards` of n series (shards <= 1: all).
func NewPlan(n, shard, shards int) *Plan {
	p := &Plan{fams: Families()}
	for _, f := range p.fams {
		p.samples = append(p.samples, samples(f, n, shard, shards))
	}
	return p
}

// Write writes the plan's samples. Families the allowlist disables are
// skipped before their samples are touched, like a plugin that does not read
// a disabled source.
func (p *Plan) Write(w *sdk.Writer) {
	for i, f := range p.fams {
		if !w.Enabled(f.Desc) {
			continue
		}
		for _, s := range p.samples[i] {
			switch f.Kind {
			case Counter:
				w.Counter(f.Desc, s.Value, s.LabelValues...)
			case Gauge:
				w.Gauge(f.Desc, s.Value, s.LabelValues...)
			case Histogram:
				w.Histogram(f.Desc, Bounds, histCum, uint64(len(observations)), histSum, s.LabelValues...)
			}
		}
	}
}

// Register adds the same n series to reg as client_golang vectors, the way
// an instrumented exporter holds them.
func Register(reg prometheus.Registerer, n int) error {
	for _, f := range Families() {
		ss := samples(f, n, 0, 1)
		switch f.Kind {
		case Counter:
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Desc.Name, Help: f.Desc.Help}, f.Labels)
			if err := reg.Register(v); err != nil {
				return err
			}
			for _, s := range ss {
				v.WithLabelValues(s.LabelValues...).Add(s.Value)
			}
		case Gauge:
			v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.Desc.Name, Help: f.Desc.Help}, f.Labels)
			if err := reg.Register(v); err != nil {
				return err
			}
			for _, s := range ss {
				v.WithLabelValues(s.LabelValues...).Set(s.Value)
			}
		case Histogram:
			v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: f.Desc.Name, Help: f.Desc.Help, Buckets: Bounds}, f.Labels)
			if err := reg.Register(v); err != nil {
				return err
			}
			for _, s := range ss {
				o := v.WithLabelValues(s.LabelValues...)
				for _, x := range observations {
					o.Observe(x)
				}
			}
		}
	}
	return nil
}

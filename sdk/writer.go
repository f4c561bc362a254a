package sdk

import (
	"fmt"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// DefaultBatchSamples is how many samples a batch holds before it is sent.
// Measured: 2k–16k samples per batch keeps both the per-message overhead and
// the peak memory of a 100k-series collect low (docs/design.md).
const DefaultBatchSamples = wire.DefaultBatchSamples

// DefaultBatchBytes is the encoded size at which a batch is sent even with
// fewer samples: long label values or many buckets per sample then still
// travel in messages far below the host's per-message limit
// (internal/wire.MaxMessageBytes, 4 MiB).
const DefaultBatchBytes = wire.DefaultBatchBytes

// Writer receives one collect's samples and packs them straight into
// columnar batches. It is not safe for concurrent use: a collector that fans
// out over goroutines must serialise its writes (or gather and then write).
//
// Families that the allowlist disables are dropped at the door; check
// Enabled before reading an expensive source so it is not read at all.
type Writer struct {
	filter *metricfilter.Filter
	prefix string
	enc    *wire.Encoder // the batch format: internal/wire
	descs  map[*Desc]descState
	// the last Desc written and its state: a plugin writes a family's
	// samples one after the other
	lastD  *Desc
	lastSt descState

	// native's spans, reused from sample to sample
	spanOffsets []int32
	spanLengths []uint32
}

// Flush sends what is buffered and returns the first send error, for a
// Writer a benchmark made with sdktest.NewWriter (Serve flushes the Writer
// it gave Collect itself).
func (w *Writer) Flush() error { return w.enc.Flush() }

// newWriter returns a Writer over a new encoder; recycle as
// wire.NewEncoder's.
func newWriter(filter *metricfilter.Filter, prefix string, batchSamples int, recycle bool, send func(*pluginv1.CollectResponse) error) *Writer {
	return &Writer{
		filter: filter,
		prefix: prefix,
		enc:    wire.NewEncoder(batchSamples, recycle, send),
		descs:  make(map[*Desc]descState, 64),
	}
}

// restart readies a flushed Writer for another collect that sends to send:
// nothing of the last one is kept but memory (the encoder's), and the
// allowlist decisions of the same filter and prefix.
func (w *Writer) restart(send func(*pluginv1.CollectResponse) error) { w.enc.Restart(send) }

// descState is what a Writer keeps of a Desc from its first sample on:
// the allowlist's decision, and the header the encoder keys the Desc's
// chunks by. The header is filled from the Desc whenever a chunk starts,
// as a Desc a plugin changes between collects (textfile's do) must be
// read then.
type descState struct {
	on bool
	h  *wire.Header
}

// state returns d's descState, made on d's first use.
func (w *Writer) state(d *Desc) descState {
	if d == w.lastD {
		return w.lastSt
	}
	st, ok := w.descs[d]
	if !ok {
		st.on = allowed(w.filter, w.prefix, d)
		if st.on {
			st.h = &wire.Header{}
		}
		w.descs[d] = st
	}
	w.lastD, w.lastSt = d, st
	return st
}

// Enabled reports whether the family is selected by the host's allowlist,
// matched as the host matches it: against the name as exposed, the
// metric_prefix included.
func (w *Writer) Enabled(d *Desc) bool { return w.state(d).on }

// AnyEnabled reports whether the allowlist selects any of the families:
// a source that feeds only these need not be read when it selects none.
//
//	if w.AnyEnabled(descRxBytes, descTxBytes) { stats, err := readStats() ... }
func (w *Writer) AnyEnabled(ds ...*Desc) bool {
	for _, d := range ds {
		if w.Enabled(d) {
			return true
		}
	}
	return false
}

// allowed is the allowlist decision, the host's own: the patterns match
// the family name an operator sees in /metrics, prefix included. Matching
// the declared name as well would collect, with a prefix, families the
// host then hides (--metrics.enabled=demo_* and metric_prefix pre_: the
// host serves no pre_demo_*).
func allowed(f *metricfilter.Filter, prefix string, d *Desc) bool {
	if len(d.SelectedBy) == 0 {
		return f.Allow(prefix + d.Name)
	}
	by := d.SelectedBy
	if prefix != "" {
		by = make([]string, len(d.SelectedBy))
		for i, n := range d.SelectedBy {
			by[i] = prefix + n
		}
	}
	return f.AllowFamily(prefix+d.Name, by)
}

// Error records a partial failure; the host counts and logs it, and the rest
// of the collect goes on. Identical (collector, message) pairs are reported once.
func (w *Writer) Error(collector string, err error) {
	if err == nil {
		return
	}
	w.enc.Error(collector, err.Error())
}

// Counter writes one counter sample.
func (w *Writer) Counter(d *Desc, value float64, labelValues ...string) {
	w.value(d, Counter, value, labelValues)
}

// Gauge writes one gauge sample.
func (w *Writer) Gauge(d *Desc, value float64, labelValues ...string) {
	w.value(d, Gauge, value, labelValues)
}

// Untyped writes one untyped sample.
func (w *Writer) Untyped(d *Desc, value float64, labelValues ...string) {
	w.value(d, Untyped, value, labelValues)
}

func (w *Writer) value(d *Desc, typ Type, value float64, lv []string) {
	if c := w.chunk(d, typ, lv, nil, false); c != nil {
		w.enc.AddValue(c, lv, value)
	}
}

// Histogram writes one classic histogram. bounds are the finite upper
// bounds in ascending order, cumulative holds the cumulative count of each of
// them; the +Inf bucket is count.
func (w *Writer) Histogram(d *Desc, bounds []float64, cumulative []uint64, count uint64, sum float64, labelValues ...string) {
	if len(bounds) != len(cumulative) {
		w.misuse(d, fmt.Errorf("histogram %s: %d bounds but %d bucket counts", d.Name, len(bounds), len(cumulative)))
		return
	}
	if c := w.chunk(d, Histogram, labelValues, bounds, false); c != nil {
		w.enc.AddHistogram(c, labelValues, cumulative, count, sum)
	}
}

// Summary writes one summary; quantiles and values pair up.
func (w *Writer) Summary(d *Desc, quantiles, values []float64, count uint64, sum float64, labelValues ...string) {
	if len(quantiles) != len(values) {
		w.misuse(d, fmt.Errorf("summary %s: %d quantiles but %d values", d.Name, len(quantiles), len(values)))
		return
	}
	if c := w.chunk(d, Summary, labelValues, quantiles, false); c != nil {
		w.enc.AddSummary(c, labelValues, values, count, sum)
	}
}

// chunk returns the chunk the sample goes to, or nil if it is dropped.
// native says the sample is a native histogram (NativeHistogram).
func (w *Writer) chunk(d *Desc, typ Type, lv []string, bounds []float64, native bool) *pluginv1.FamilyChunk {
	st := w.state(d)
	if !st.on || w.enc.SendErr() != nil {
		return nil
	}
	if d.Type != typ {
		w.misuse(d, fmt.Errorf("family %s is declared %s but written as %s", d.Name, d.Type, typ))
		return nil
	}
	if len(lv) != len(d.Labels) {
		w.misuse(d, fmt.Errorf("family %s has %d label names but a sample has %d values", d.Name, len(d.Labels), len(lv)))
		return nil
	}
	if c := w.enc.Chunk(st.h, bounds, native); c != nil {
		return c
	}
	*st.h = wire.Header{Name: w.prefix + d.Name, Type: d.Type.wire(), Help: d.Help, Unit: d.Unit, Labels: d.Labels}
	return w.enc.Start(st.h, bounds)
}

func (w *Writer) misuse(d *Desc, err error) { w.Error("sdk", err) }

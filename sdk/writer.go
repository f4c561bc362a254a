package sdk

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/plexporter/plexporter/internal/batch"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// DefaultBatchSamples is how many samples a batch holds before it is sent.
// Measured: 2k–16k samples per batch keeps both the per-message overhead and
// the peak memory of a 100k-series collect low (docs/design.md).
const DefaultBatchSamples = 8192

// DefaultBatchBytes is the encoded size at which a batch is sent even with
// fewer samples: long label values or many buckets per sample then still
// travel in messages far below the host's per-message limit
// (internal/batch.MaxMessageBytes, 4 MiB).
const DefaultBatchBytes = 1 << 20

// Writer receives one collect's samples and packs them straight into
// columnar batches. It is not safe for concurrent use: a collector that fans
// out over goroutines must serialise its writes (or gather and then write).
//
// Families that the allowlist disables are dropped at the door; check
// Enabled before reading an expensive source so it is not read at all.
type Writer struct {
	filter *metricfilter.Filter
	prefix string
	send   func(*pluginv1.CollectResponse) error
	limit  int

	batch   *pluginv1.Batch
	strings map[string]uint32
	chunks  map[*Desc]*pluginv1.FamilyChunk
	samples int
	bytes   int // upper bound of the batch's encoded size

	enabled  map[*Desc]bool
	errs     []*pluginv1.CollectError
	reported map[string]bool // error causes already reported in this collect
	sendErr  error

	// recycle is set when send has serialised the batch by the time it
	// returns (gRPC's Send does): the next batch then reuses its memory
	// instead of allocating ~all of it again.
	recycle bool
	spare   []*pluginv1.FamilyChunk
}

// Flush sends what is buffered and returns the first send error, for a
// Writer a benchmark made with sdktest.NewWriter (Serve flushes the Writer
// it gave Collect itself).
func (w *Writer) Flush() error {
	w.flush()
	return w.sendErr
}

// initialStrings sizes a new Writer's string table. Serve keeps a plugin's
// Writer from collect to collect, so a table that must grow does so once;
// the host's own families pass through two new Writers per scrape with
// about 200 strings, where a table of 1024 was ~75 kB of garbage a scrape.
const initialStrings = 256

func newWriter(filter *metricfilter.Filter, prefix string, batchSamples int, send func(*pluginv1.CollectResponse) error) *Writer {
	if batchSamples <= 0 {
		batchSamples = DefaultBatchSamples
	}
	w := &Writer{
		filter:   filter,
		prefix:   prefix,
		send:     send,
		limit:    batchSamples,
		strings:  make(map[string]uint32, initialStrings),
		chunks:   make(map[*Desc]*pluginv1.FamilyChunk, 64),
		enabled:  make(map[*Desc]bool, 64),
		reported: map[string]bool{},
	}
	w.reset()
	return w
}

// restart readies a flushed Writer for another collect that sends to send:
// nothing of the last one is kept but memory (the table and maps, and
// the sent chunks when it recycles them), and the allowlist decisions of
// the same filter and prefix.
func (w *Writer) restart(send func(*pluginv1.CollectResponse) error) {
	w.send, w.sendErr, w.errs = send, nil, nil
	clear(w.reported)
	w.reset()
}

func (w *Writer) reset() {
	if w.recycle && w.batch != nil {
		for _, c := range w.batch.Families {
			w.spare = append(w.spare, c)
		}
		clear(w.batch.Strings[1:])
		w.batch.Strings = w.batch.Strings[:1]
		clear(w.batch.Families)
		w.batch.Families = w.batch.Families[:0]
	} else {
		// The next new chunk makes the next batch (chunk): none is made
		// after the last flush of a collect, where nothing would fill it —
		// for the host, whose own families pass through two Writers per
		// scrape, that was a 24 kB string table per Writer per scrape.
		w.batch = nil
	}
	clear(w.strings)
	w.strings[""] = 0
	clear(w.chunks)
	w.samples, w.bytes = 0, 0
}

// Enabled reports whether the family is selected by the host's allowlist,
// matched as the host matches it: against the name as exposed, the
// metric_prefix included.
func (w *Writer) Enabled(d *Desc) bool {
	on, ok := w.enabled[d]
	if !ok {
		on = allowed(w.filter, w.prefix, d)
		w.enabled[d] = on
	}
	return on
}

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
	msg := validUTF8(err.Error())
	collector = validUTF8(collector)
	key := collector + "\x00" + msg
	if w.reported[key] {
		return
	}
	w.reported[key] = true
	w.errs = append(w.errs, &pluginv1.CollectError{Collector: collector, Message: msg})
}

// validUTF8 replaces invalid UTF-8 in an error's text (a file name read
// from the kernel, say): CollectError's fields are protobuf strings, and
// one invalid byte in them would fail the whole message, the batch with it.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
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
	c := w.chunk(d, typ, lv, nil, false)
	if c == nil {
		return
	}
	c.Values = append(c.Values, value)
	w.sampleDone(9)
}

// Histogram writes one classic histogram. bounds are the finite upper
// bounds in ascending order, cumulative holds the cumulative count of each of
// them; the +Inf bucket is count.
func (w *Writer) Histogram(d *Desc, bounds []float64, cumulative []uint64, count uint64, sum float64, labelValues ...string) {
	if len(bounds) != len(cumulative) {
		w.misuse(d, fmt.Errorf("histogram %s: %d bounds but %d bucket counts", d.Name, len(bounds), len(cumulative)))
		return
	}
	c := w.chunk(d, Histogram, labelValues, bounds, false)
	if c == nil {
		return
	}
	c.Values = append(c.Values, sum)
	c.Counts = append(c.Counts, count)
	c.BucketCounts = append(c.BucketCounts, cumulative...)
	w.sampleDone(9 + 10 + 10*len(cumulative))
}

// Summary writes one summary; quantiles and values pair up.
func (w *Writer) Summary(d *Desc, quantiles, values []float64, count uint64, sum float64, labelValues ...string) {
	if len(quantiles) != len(values) {
		w.misuse(d, fmt.Errorf("summary %s: %d quantiles but %d values", d.Name, len(quantiles), len(values)))
		return
	}
	c := w.chunk(d, Summary, labelValues, quantiles, false)
	if c == nil {
		return
	}
	c.Values = append(c.Values, sum)
	c.Counts = append(c.Counts, count)
	c.QuantileValues = append(c.QuantileValues, values...)
	w.sampleDone(9 + 10 + 8*len(values))
}

// chunk returns the chunk the sample goes to, or nil if it is dropped.
// native says the sample is a native histogram (NativeHistogram).
func (w *Writer) chunk(d *Desc, typ Type, lv []string, bounds []float64, native bool) *pluginv1.FamilyChunk {
	if !w.Enabled(d) || w.sendErr != nil {
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
	c := w.chunks[d]
	if c == nil || ((typ == Histogram || typ == Summary) && !sameShape(c.Bounds, len(c.NativeSchemas) > 0, bounds, native)) {
		// A new batch, or a histogram whose buckets (or native columns) or a
		// summary whose quantiles differ from the chunk's: start a chunk (the
		// host joins chunks of one family). A histogram without bounds
		// after one with them needs one too, or its chunk's bucket column
		// would come out short.
		if w.batch == nil {
			w.batch = &pluginv1.Batch{Strings: make([][]byte, 1, initialStrings)}
		}
		c = w.newChunk()
		c.Name = w.intern(w.prefix + d.Name)
		c.Type = d.Type.wire()
		c.Help = w.intern(d.Help)
		c.Unit = w.intern(d.Unit)
		for _, l := range d.Labels {
			c.LabelNames = append(c.LabelNames, w.intern(l))
		}
		if bounds != nil {
			c.Bounds = append(c.Bounds, bounds...)
		}
		w.bytes += 32 + 5*len(d.Labels) + 8*len(bounds)
		w.chunks[d] = c
		w.batch.Families = append(w.batch.Families, c)
	}
	for _, v := range lv {
		c.LabelValues = append(c.LabelValues, w.intern(v))
	}
	w.bytes += 5 * len(lv)
	return c
}

// newChunk returns an empty chunk, reusing a sent one's memory if it can.
func (w *Writer) newChunk() *pluginv1.FamilyChunk {
	n := len(w.spare)
	if n == 0 {
		return &pluginv1.FamilyChunk{}
	}
	c := w.spare[n-1]
	w.spare = w.spare[:n-1]
	batch.Reset(c)
	return c
}

func (w *Writer) misuse(d *Desc, err error) { w.Error("sdk", err) }

func (w *Writer) intern(s string) uint32 {
	if i, ok := w.strings[s]; ok {
		return i
	}
	i := uint32(len(w.batch.Strings))
	// The table entry shares the string's memory; Go strings never change,
	// and the marshaller only reads it (batch.TableEntry).
	w.batch.Strings = append(w.batch.Strings, batch.TableEntry(s))
	w.strings[s] = i
	w.bytes += len(s) + 6
	return i
}

// sampleDone counts a written sample whose values take up to size bytes
// encoded, and sends the batch once it is full.
func (w *Writer) sampleDone(size int) {
	w.samples++
	w.bytes += size
	if w.samples >= w.limit || w.bytes >= DefaultBatchBytes {
		w.flush()
	}
}

// flush sends the current batch and any errors recorded so far.
func (w *Writer) flush() {
	if w.sendErr != nil {
		return
	}
	if w.samples == 0 && len(w.errs) == 0 {
		return
	}
	msg := &pluginv1.CollectResponse{Errors: w.errs}
	if w.samples > 0 {
		msg.Batch = w.batch
	}
	w.errs = nil
	w.sendErr = w.send(msg)
	w.reset()
}

package wire

import (
	"slices"
	"strings"
	"unicode/utf8"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// DefaultBatchSamples is how many samples a batch holds before it is sent.
// Measured: 2k–16k samples per batch keeps both the per-message overhead and
// the peak memory of a 100k-series collect low (docs/design.md).
const DefaultBatchSamples = 8192

// DefaultBatchBytes is the encoded size at which a batch is sent even with
// fewer samples: long label values or many buckets per sample then still
// travel in messages far below the host's per-message limit
// (MaxMessageBytes, 4 MiB).
const DefaultBatchBytes = 1 << 20

// initialStrings sizes a new Encoder's string table. Serve keeps a plugin's
// Writer (and its Encoder) from collect to collect, so a table that must
// grow does so once; a table of 1024 for the host's own families (about
// 200 strings a scrape) was ~75 kB of garbage a scrape.
const initialStrings = 256

// Header is what every chunk of a family carries besides its samples. The
// Encoder keys a family's open chunk by the *Header, so a producer makes
// one per family and passes the same pointer for every sample of it.
type Header struct {
	Name   string // as exposed: any metric_prefix included
	Type   pluginv1.MetricType
	Help   string
	Unit   string
	Labels []string
}

// Encoder packs samples straight into columnar batches (the producer side
// of this package) and hands each full batch, with the partial errors
// recorded so far, to a send function. The SDK's Writer is a facade over
// one; the host writes its own families with one directly.
//
// Writing a sample takes two calls: Open (Chunk, or Start when there is
// none) finds the chunk, then one of the Add methods appends the sample's label
// values and columns and sends the batch once it is full. An Encoder is
// not safe for concurrent use.
type Encoder struct {
	send  func(*pluginv1.CollectResponse) error
	limit int

	batch   *pluginv1.Batch
	strings map[string]uint32
	chunks  map[*Header]*pluginv1.FamilyChunk
	samples int
	bytes   int // upper bound of the batch's encoded size

	errs     []*pluginv1.CollectError
	reported map[string]bool // error causes already reported in this collect
	sendErr  error

	// recycle is set when send has serialised the batch by the time it
	// returns (gRPC's Send does): the next batch then reuses its memory
	// instead of allocating ~all of it again.
	recycle bool
	spare   []*pluginv1.FamilyChunk

	// Within a batch: the last family's open chunk (Chunk), and per label
	// position a small cache of values with their table indexes
	// (labelValues). A plugin writes a family's samples one after the
	// other, and the values at one label position come from a small set
	// (devices, ports, queues), so most samples need no map lookup at all.
	lastH  *Header
	lastC  *pluginv1.FamilyChunk
	values []valueCache
}

// valueCache is one label position's cache of interned values: slot
// valueSlot(v) holds v's table index if v is what it holds. An empty slot
// says "" is 0, which is true of every batch's table.
type valueCache [64]struct {
	s   string
	ref uint32
}

// cachedLabels is how many label positions have a valueCache (1.5 kB
// each, cleared with every batch); values at later positions are looked
// up in the table's map.
const cachedLabels = 8

// valueSlot picks a valueCache slot from the value's length and last two
// bytes: what tells apart the values of one label position (mlx5_0 …
// mlx5_15, ports 1 … 16, q0 … q7) without hashing the whole string.
func valueSlot(v string) int {
	n := len(v)
	switch n {
	case 0:
		return 0
	case 1:
		return int(v[0]) & 63
	}
	return (n*5 + int(v[n-1]) + int(v[n-2])*11) & 63
}

// NewEncoder returns an Encoder that sends a batch once it holds
// batchSamples samples (DefaultBatchSamples when <= 0) or about
// DefaultBatchBytes. recycle says that send has serialised a batch by the
// time it returns, so its memory may be reused; a send that keeps the
// batches (Recorder.Send) must pass false.
func NewEncoder(batchSamples int, recycle bool, send func(*pluginv1.CollectResponse) error) *Encoder {
	if batchSamples <= 0 {
		batchSamples = DefaultBatchSamples
	}
	e := &Encoder{
		send:     send,
		limit:    batchSamples,
		strings:  make(map[string]uint32, initialStrings),
		chunks:   make(map[*Header]*pluginv1.FamilyChunk, 64),
		reported: map[string]bool{},
		recycle:  recycle,
	}
	e.reset()
	return e
}

// Restart readies a flushed Encoder for another collect that sends to
// send: nothing of the last one is kept but memory (the table and maps,
// and the sent chunks when it recycles them).
func (e *Encoder) Restart(send func(*pluginv1.CollectResponse) error) {
	e.send, e.sendErr, e.errs = send, nil, nil
	clear(e.reported)
	e.reset()
}

func (e *Encoder) reset() {
	if e.recycle && e.batch != nil {
		for _, c := range e.batch.Families {
			e.spare = append(e.spare, c)
		}
		clear(e.batch.Strings[1:])
		e.batch.Strings = e.batch.Strings[:1]
		clear(e.batch.Families)
		e.batch.Families = e.batch.Families[:0]
	} else {
		// The next new chunk makes the next batch (Start): none is made
		// after the last flush of a collect, where nothing would fill it —
		// for the host, whose own families pass through two Encoders per
		// scrape, that was a 24 kB string table per Encoder per scrape.
		e.batch = nil
	}
	clear(e.strings)
	e.strings[""] = 0
	clear(e.chunks)
	e.lastH, e.lastC = nil, nil
	clear(e.values)
	e.samples, e.bytes = 0, 0
}

// SendErr is the first error send returned; once there is one, nothing
// more is written or sent.
func (e *Encoder) SendErr() error { return e.sendErr }

// Error records a partial failure, sent with the next batch (or by Flush).
// Identical (collector, message) pairs are recorded once per collect.
func (e *Encoder) Error(collector, message string) {
	message = validUTF8(message)
	collector = validUTF8(collector)
	key := collector + "\x00" + message
	if e.reported[key] {
		return
	}
	e.reported[key] = true
	e.errs = append(e.errs, &pluginv1.CollectError{Collector: collector, Message: message})
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

// Chunk returns the open chunk of family h that a sample goes to, or nil
// when Start must make one: none in this batch yet, or a
// histogram whose bucket bounds (or native columns) or a summary whose
// quantiles (bounds) differ from the open chunk's — the host joins the
// chunks of one family. A producer checks SendErr first: once a send
// failed, nothing more is written.
func (e *Encoder) Chunk(h *Header, bounds []float64, native bool) *pluginv1.FamilyChunk {
	c := e.lastC
	if h != e.lastH {
		if c = e.chunks[h]; c == nil {
			return nil
		}
		e.lastH, e.lastC = h, c
	}
	if typ := h.Type; (typ == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM || typ == pluginv1.MetricType_METRIC_TYPE_SUMMARY) &&
		!sameShape(c.Bounds, len(c.NativeSchemas) > 0, bounds, native) {
		// A histogram without bounds after one with them needs a chunk of
		// its own too, or its chunk's bucket column would come out short.
		return nil
	}
	return c
}

// sameShape reports whether a chunk's bounds and kind take a sample with
// these bounds, native or not.
func sameShape(chunkBounds []float64, chunkNative bool, bounds []float64, native bool) bool {
	return chunkNative == native && slices.Equal(chunkBounds, bounds)
}

// Start opens a chunk of family h with the sample's bounds
// (a histogram's finite bucket bounds or a summary's quantiles), in the
// current batch or a new one.
func (e *Encoder) Start(h *Header, bounds []float64) *pluginv1.FamilyChunk {
	if e.batch == nil {
		e.batch = &pluginv1.Batch{Strings: make([][]byte, 1, initialStrings)}
	}
	c := e.newChunk()
	c.Name = e.intern(h.Name)
	c.Type = h.Type
	c.Help = e.intern(h.Help)
	c.Unit = e.intern(h.Unit)
	for _, l := range h.Labels {
		c.LabelNames = append(c.LabelNames, e.intern(l))
	}
	if bounds != nil {
		c.Bounds = append(c.Bounds, bounds...)
	}
	e.bytes += 32 + 5*len(h.Labels) + 8*len(bounds)
	e.chunks[h] = c
	e.lastH, e.lastC = h, c
	e.batch.Families = append(e.batch.Families, c)
	return c
}

// Open returns the chunk a sample of family h goes to: Chunk's, or a new
// one Start made.
func (e *Encoder) Open(h *Header, bounds []float64, native bool) *pluginv1.FamilyChunk {
	if c := e.Chunk(h, bounds, native); c != nil {
		return c
	}
	return e.Start(h, bounds)
}

// newChunk returns an empty chunk, reusing a sent one's memory if it can.
func (e *Encoder) newChunk() *pluginv1.FamilyChunk {
	n := len(e.spare)
	if n == 0 {
		return &pluginv1.FamilyChunk{}
	}
	c := e.spare[n-1]
	e.spare = e.spare[:n-1]
	Reset(c)
	return c
}

func (e *Encoder) intern(s string) uint32 {
	if i, ok := e.strings[s]; ok {
		return i
	}
	i := uint32(len(e.batch.Strings))
	// The table entry shares the string's memory; Go strings never change,
	// and the marshaller only reads it (TableEntry).
	e.batch.Strings = append(e.batch.Strings, TableEntry(s))
	e.strings[s] = i
	e.bytes += len(s) + 6
	return i
}

func (e *Encoder) labelValues(c *pluginv1.FamilyChunk, lv []string) {
	for len(e.values) < min(len(lv), cachedLabels) {
		e.values = append(e.values, valueCache{})
	}
	for j, v := range lv {
		if j >= cachedLabels {
			c.LabelValues = append(c.LabelValues, e.intern(v))
			continue
		}
		slot := &e.values[j][valueSlot(v)]
		if slot.s != v {
			slot.s, slot.ref = v, e.intern(v)
		}
		c.LabelValues = append(c.LabelValues, slot.ref)
	}
	e.bytes += 5 * len(lv)
}

// AddValue appends a counter, gauge or untyped sample to c.
func (e *Encoder) AddValue(c *pluginv1.FamilyChunk, lv []string, value float64) {
	e.labelValues(c, lv)
	c.Values = append(c.Values, value)
	e.sampleDone(9)
}

// AddHistogram appends a classic histogram sample to c: cumulative holds
// the cumulative count of each of c's bounds; the +Inf bucket is count.
func (e *Encoder) AddHistogram(c *pluginv1.FamilyChunk, lv []string, cumulative []uint64, count uint64, sum float64) {
	e.labelValues(c, lv)
	c.Values = append(c.Values, sum)
	c.Counts = append(c.Counts, count)
	c.BucketCounts = append(c.BucketCounts, cumulative...)
	e.sampleDone(9 + 10 + 10*len(cumulative))
}

// AddSummary appends a summary sample to c: values pair up with c's
// quantiles.
func (e *Encoder) AddSummary(c *pluginv1.FamilyChunk, lv []string, values []float64, count uint64, sum float64) {
	e.labelValues(c, lv)
	c.Values = append(c.Values, sum)
	c.Counts = append(c.Counts, count)
	c.QuantileValues = append(c.QuantileValues, values...)
	e.sampleDone(9 + 10 + 8*len(values))
}

// NativeSample is one native histogram sample as AddNative takes it. The
// spans of both sides are in SpanOffsets and SpanLengths, the positive
// side's PositiveSpans first, then the negative side's; the bucket counts
// are absolute (AddNative writes them as the protocol's deltas).
type NativeSample struct {
	Sum           float64
	Count         uint64
	Cumulative    []uint64 // the classic buckets' cumulative counts, if any
	Schema        int32
	ZeroThreshold float64
	ZeroCount     uint64

	PositiveSpans, NegativeSpans int
	SpanOffsets                  []int32
	SpanLengths                  []uint32

	PositiveBuckets, NegativeBuckets []uint64
}

// AddNative appends a native histogram sample (and its classic buckets,
// when it has them) to c, a chunk Chunk or Start returned for native.
func (e *Encoder) AddNative(c *pluginv1.FamilyChunk, lv []string, h *NativeSample) {
	e.labelValues(c, lv)
	c.Values = append(c.Values, h.Sum)
	c.Counts = append(c.Counts, h.Count)
	c.BucketCounts = append(c.BucketCounts, h.Cumulative...)
	c.NativeSchemas = append(c.NativeSchemas, h.Schema)
	c.NativeZeroThresholds = append(c.NativeZeroThresholds, h.ZeroThreshold)
	c.NativeZeroCounts = append(c.NativeZeroCounts, h.ZeroCount)
	c.NativePositiveSpanCounts = append(c.NativePositiveSpanCounts, uint32(h.PositiveSpans))
	c.NativeNegativeSpanCounts = append(c.NativeNegativeSpanCounts, uint32(h.NegativeSpans))
	c.NativeSpanOffsets = append(c.NativeSpanOffsets, h.SpanOffsets...)
	c.NativeSpanLengths = append(c.NativeSpanLengths, h.SpanLengths...)
	c.NativeDeltas = appendDeltas(c.NativeDeltas, h.PositiveBuckets)
	c.NativeDeltas = appendDeltas(c.NativeDeltas, h.NegativeBuckets)
	spans, buckets := h.PositiveSpans+h.NegativeSpans, len(h.PositiveBuckets)+len(h.NegativeBuckets)
	e.sampleDone(9 + 10 + 10*len(h.Cumulative) + 3 + 9 + 10 + 10 + 10*spans + 10*buckets)
}

// appendDeltas appends counts as the protocol's deltas: each count's
// difference to the one before it (the first's to 0).
func appendDeltas(deltas []int64, counts []uint64) []int64 {
	prev := uint64(0)
	for _, c := range counts {
		deltas = append(deltas, int64(c-prev)) // two's complement: a decrease is negative
		prev = c
	}
	return deltas
}

// sampleDone counts a written sample whose values take up to size bytes
// encoded, and sends the batch once it is full.
func (e *Encoder) sampleDone(size int) {
	e.samples++
	e.bytes += size
	if e.samples >= e.limit || e.bytes >= DefaultBatchBytes {
		e.Flush()
	}
}

// Flush sends the current batch and any errors recorded so far, and
// returns the first send error.
func (e *Encoder) Flush() error {
	if e.sendErr != nil {
		return e.sendErr
	}
	if e.samples == 0 && len(e.errs) == 0 {
		return nil
	}
	msg := &pluginv1.CollectResponse{Errors: e.errs}
	if e.samples > 0 {
		msg.Batch = e.batch
	}
	e.errs = nil
	e.sendErr = e.send(msg)
	e.reset()
	return e.sendErr
}

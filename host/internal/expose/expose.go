// Package expose renders merged families in the Prometheus text format
// 0.0.4, OpenMetrics 1.0 and the delimited protobuf format.
//
// Text and OpenMetrics are written directly from the batches: measured on
// 100k series it is ~5x cheaper than converting to client_model and going
// through expfmt (docs/design.md). Tests parse both outputs with expfmt and
// compare them, plus a fuzz test, so the fast writers cannot drift.
package expose

import (
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// flushAt is the buffer size at which a writer hands bytes to the sink.
const flushAt = 32 << 10

// Write renders fams in format (as negotiated by expfmt) to w.
func Write(w io.Writer, format expfmt.Format, fams []*guard.Family) error {
	switch format.FormatType() {
	case expfmt.TypeOpenMetrics:
		return writeText(w, fams, true)
	case expfmt.TypeProtoDelim:
		return writeProtoDelim(w, fams)
	case expfmt.TypeProtoText, expfmt.TypeProtoCompact:
		return writeProto(w, format, fams)
	default:
		return writeText(w, fams, false)
	}
}

// Formats is what the host offers in content negotiation, in order of preference.
var Formats = []expfmt.Format{
	expfmt.FmtProtoDelim,
	expfmt.FmtOpenMetrics_1_0_0,
	expfmt.FmtOpenMetrics_0_0_1,
	expfmt.FmtText,
}

func writeProto(w io.Writer, format expfmt.Format, fams []*guard.Family) error {
	enc := expfmt.NewEncoder(w, format)
	for _, f := range fams {
		if err := enc.Encode(toDTO(f)); err != nil {
			return err
		}
	}
	return nil
}

type textWriter struct {
	w   io.Writer
	buf []byte
	om  bool
	err error

	// the labels of the sample written last (render): rendered, where
	// each label ends in them, and their value references
	labels    []byte
	labelEnds []int
	refs      []uint32
	// scratch of multi, reused from part to part
	bounds []byte
	ends   []int
}

func (t *textWriter) maybeFlush() {
	if len(t.buf) >= flushAt && t.err == nil {
		_, t.err = t.w.Write(t.buf)
		t.buf = t.buf[:0]
	}
}

// textBuffers keeps the text writers' buffers from scrape to scrape (36 kB
// of garbage a scrape otherwise, the largest single allocation of a small
// one).
var textBuffers = sync.Pool{New: func() any { b := make([]byte, 0, flushAt+4096); return &b }}

func writeText(w io.Writer, fams []*guard.Family, om bool) error {
	bp := textBuffers.Get().(*[]byte)
	t := &textWriter{w: w, buf: (*bp)[:0], om: om}
	defer func() {
		if cap(t.buf) <= 2*(flushAt+4096) { // one huge sample's growth is not kept
			*bp = t.buf[:0]
			textBuffers.Put(bp)
		}
	}()
	for _, f := range fams {
		t.family(f)
		if t.err != nil {
			return t.err
		}
	}
	if om {
		t.buf = append(t.buf, "# EOF\n"...)
	}
	if t.err == nil && len(t.buf) > 0 {
		_, t.err = w.Write(t.buf)
	}
	return t.err
}

func (t *textWriter) family(f *guard.Family) {
	metaName := f.Name
	typ := typeNames[f.Type]
	if t.om {
		if f.Type == pluginv1.MetricType_METRIC_TYPE_COUNTER {
			if base, ok := strings.CutSuffix(f.Name, "_total"); ok {
				metaName = base
			} else {
				typ = "unknown" // OpenMetrics counters need _total
			}
		} else if f.Type == pluginv1.MetricType_METRIC_TYPE_UNTYPED {
			typ = "unknown"
		}
	}
	t.buf = append(t.buf, "# HELP "...)
	t.buf = append(t.buf, metaName...)
	t.buf = append(t.buf, ' ')
	t.buf = appendEscaped(t.buf, f.Help, t.om)
	t.buf = append(t.buf, '\n')
	t.buf = append(t.buf, "# TYPE "...)
	t.buf = append(t.buf, metaName...)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, typ...)
	t.buf = append(t.buf, '\n')
	if t.om && f.Unit != "" && strings.HasSuffix(metaName, "_"+f.Unit) {
		t.buf = append(t.buf, "# UNIT "...)
		t.buf = append(t.buf, metaName...)
		t.buf = append(t.buf, ' ')
		t.buf = append(t.buf, f.Unit...)
		t.buf = append(t.buf, '\n')
	}
	for pi := range f.Parts {
		p := &f.Parts[pi]
		c := &p.Chunk
		switch f.Type {
		case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, pluginv1.MetricType_METRIC_TYPE_SUMMARY:
			t.multi(f, p)
			continue
		}
		t.labelsFrom(c)
		for k, n := 0, p.Samples(); k < n; k++ {
			i := p.Index(k)
			b := append(t.buf, f.Name...)
			if lv := c.LabelRefs(i); len(lv) > 0 {
				t.render(f.LabelNames, c, lv)
				b = append(b, '{')
				b = append(b, t.labels...)
				b = append(b, '}')
			}
			b = append(b, ' ')
			b = t.appendFloat(b, c.Value(i))
			t.buf = append(b, '\n')
			t.maybeFlush()
		}
	}
}

// multi writes the samples of part p of a histogram or summary family:
// several lines per sample that differ only in their suffix and their le
// or quantile label. The sample's labels are rendered once and copied into
// each line, the chunk's bounds formatted once for all its samples.
func (t *textWriter) multi(f *guard.Family, p *guard.Part) {
	c := &p.Chunk
	hist := f.Type == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM
	extra := "quantile"
	if hist {
		extra = "le"
	}
	// t.bounds: `le="<bound>"` (or quantile) for each of the chunk's
	// bounds, then `le="+Inf"` for a histogram; t.ends[j] ends entry j.
	t.bounds, t.ends = t.bounds[:0], t.ends[:0]
	for _, ub := range c.Bounds() {
		t.bounds = append(t.bounds, extra...)
		t.bounds = append(t.bounds, '=', '"')
		t.bounds = t.appendFloat(t.bounds, ub)
		t.bounds = append(t.bounds, '"')
		t.ends = append(t.ends, len(t.bounds))
	}
	if hist {
		t.bounds = append(t.bounds, `le="+Inf"`...)
		t.ends = append(t.ends, len(t.bounds))
	}
	t.labelsFrom(c)
	for k, n := 0, p.Samples(); k < n; k++ {
		i := p.Index(k)
		t.render(f.LabelNames, c, c.LabelRefs(i))
		if hist {
			_, cum := c.Buckets(i)
			start := 0
			for j, end := range t.ends {
				t.line(f.Name, "_bucket", t.bounds[start:end])
				start = end
				if j < len(cum) {
					t.uint(cum[j])
				} else {
					t.uint(c.Count(i))
				}
			}
		} else {
			_, vs := c.Quantiles(i)
			start := 0
			for j, end := range t.ends {
				t.line(f.Name, "", t.bounds[start:end])
				start = end
				t.float(vs[j])
			}
		}
		t.line(f.Name, "_sum", nil)
		t.float(c.Value(i))
		t.line(f.Name, "_count", nil)
		t.uint(c.Count(i))
		t.maybeFlush()
	}
}

// labelsFrom starts the rendering of chunk c's samples' labels (render):
// nothing rendered yet is reused.
func (t *textWriter) labelsFrom(c *wire.Chunk) {
	t.labels, t.labelEnds, t.refs = t.labels[:0], t.labelEnds[:0], t.refs[:0]
}

// render sets t.labels to `name="value",...` for the label value
// references lv into c's string table (Chunk.LabelRefs), the same chunk
// as the sample rendered before (labelsFrom). The labels up to the first
// whose value differs from that sample's are kept as rendered: samples
// come grouped (a device's ports, a port's queues), so most of a line's
// labels are rendered once for many series.
func (t *textWriter) render(names []string, c *wire.Chunk, lv []uint32) {
	j := 0
	for j < len(t.refs) && j < len(lv) && t.refs[j] == lv[j] {
		j++
	}
	if j == len(lv) && j == len(t.refs) {
		return
	}
	t.refs = append(t.refs[:0], lv...)
	t.labelEnds = t.labelEnds[:j]
	b := t.labels[:0]
	if j > 0 {
		b = t.labels[:t.labelEnds[j-1]]
	}
	for ; j < len(lv); j++ {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, names[j]...)
		b = append(b, '=', '"')
		b = appendEscaped(b, c.String(lv[j]), true)
		b = append(b, '"')
		t.labelEnds = append(t.labelEnds, len(b))
	}
	t.labels = b
}

// line writes "name<suffix>{<t.labels>,<extra>} " (the value follows):
// t.labels holds the sample's rendered labels, extra a rendered le or
// quantile label or nothing.
func (t *textWriter) line(name, suffix string, extra []byte) {
	b := append(t.buf, name...)
	b = append(b, suffix...)
	if len(t.labels) > 0 || len(extra) > 0 {
		b = append(b, '{')
		b = append(b, t.labels...)
		if len(extra) > 0 {
			if len(t.labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, extra...)
		}
		b = append(b, '}')
	}
	t.buf = append(b, ' ')
}

func (t *textWriter) float(v float64) {
	t.buf = append(t.appendFloat(t.buf, v), '\n')
}

// uint writes a count. OpenMetrics has integer counts; the text format
// writes them as floats, like expfmt, since Prometheus reads floats anyway.
func (t *textWriter) uint(v uint64) {
	if t.om {
		t.buf = append(strconv.AppendUint(t.buf, v, 10), '\n')
		return
	}
	t.float(float64(v))
}

// appendFloat formats like expfmt: shortest repr, +Inf/-Inf/NaN, and in
// OpenMetrics a ".0" on integral values.
func (t *textWriter) appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	if f == 0 {
		f = 0 // -0 as 0, as expfmt writes it (its f == 0 case)
	}
	start := len(b)
	b = appendShortest(b, f)
	if t.om {
		integral := true
		for _, c := range b[start:] {
			if c == '.' || c == 'e' {
				integral = false
				break
			}
		}
		if integral {
			b = append(b, '.', '0')
		}
	}
	return b
}

// appendEscaped escapes backslash and newline, and the double quote when
// quoted (label values, and OpenMetrics help text).
func appendEscaped(b []byte, s string, quote bool) []byte {
	i := 0
	for i < len(s) && s[i] != '\\' && s[i] != '\n' && (s[i] != '"' || !quote) {
		i++
	}
	if i == len(s) { // nothing to escape: the common case, in one copy
		return append(b, s...)
	}
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '"':
			if quote {
				b = append(b, '\\', '"')
			} else {
				b = append(b, c)
			}
		default:
			b = append(b, c)
		}
	}
	return b
}

var typeNames = map[pluginv1.MetricType]string{
	pluginv1.MetricType_METRIC_TYPE_COUNTER:   "counter",
	pluginv1.MetricType_METRIC_TYPE_GAUGE:     "gauge",
	pluginv1.MetricType_METRIC_TYPE_HISTOGRAM: "histogram",
	pluginv1.MetricType_METRIC_TYPE_SUMMARY:   "summary",
	pluginv1.MetricType_METRIC_TYPE_UNTYPED:   "untyped",
}

package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/plexporter/plexporter/host/internal/config"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// The encoders are the only part of the push that differs between
// protocols: the ring, the spool, the sender, its retries and the
// self-metrics are shared. Each encodes n samples of a snapshot, the
// ring's head, with the pusher's lock held (they read the table).

// encode returns the request of b's next n samples for the configured
// protocol: a *writeRequest (remote write 1.0), a *writev2.Request (2.0)
// or a *colmetricpb.ExportMetricsServiceRequest (OTLP). p.mu is held.
func (p *Pusher) encode(b *snapshot, n int) any {
	switch p.cfg.Protocol {
	case config.PushRemoteWriteV2:
		return p.encodeRW2(b, n)
	case config.PushOTLP:
		return p.encodeOTLP(b, n)
	}
	return p.request(b, n)
}

// chunk returns how many of b's unsent samples the next request takes:
// at most max_samples_per_send, except that an OTLP request does not end
// in the middle of a histogram's or a summary's series (they are one
// data point). p.mu is held.
func (p *Pusher) chunk(b *snapshot) int {
	n := min(p.cfg.MaxSamplesPerSend, b.unsent())
	if p.cfg.Protocol == config.PushOTLP {
		for b.done+n < len(b.ids) && !p.tab.info[b.ids[b.done+n]].first {
			n++
		}
	}
	return n
}

// rw2Types maps the host's metric types to remote write 2.0's.
var rw2Types = map[pluginv1.MetricType]writev2.Metadata_MetricType{
	pluginv1.MetricType_METRIC_TYPE_COUNTER:   writev2.Metadata_METRIC_TYPE_COUNTER,
	pluginv1.MetricType_METRIC_TYPE_GAUGE:     writev2.Metadata_METRIC_TYPE_GAUGE,
	pluginv1.MetricType_METRIC_TYPE_HISTOGRAM: writev2.Metadata_METRIC_TYPE_HISTOGRAM,
	pluginv1.MetricType_METRIC_TYPE_SUMMARY:   writev2.Metadata_METRIC_TYPE_SUMMARY,
}

// encodeRW2 is a remote write 2.0 request: one symbols table for the
// request's strings, each series with its labels, one sample and its
// family's metadata (type, help, unit). The request's messages and label
// references are allocated together, a few slices a request rather than
// several objects a series. The symbols table is the table's interned
// strings numbered for this request (symbols.symbolize), which does what
// client_golang's writev2.SymbolsTable does with a map lookup of every
// string; help and unit texts, not interned, go through such a table's
// map, once per family. p.mu is held.
func (p *Pusher) encodeRW2(b *snapshot, n int) *writev2.Request {
	y := &p.tab.syms
	ids, values := b.ids[b.done:b.done+n], b.values[b.done:b.done+n]
	nrefs := 0
	for _, id := range ids {
		nrefs += len(p.tab.symsOf(id))
	}
	syms := y.request()
	texts := map[string]uint32{"": 0} // help and unit
	text := func(s string) uint32 {
		if g, ok := y.byStr[s]; ok {
			return y.symbolize(&syms, g)
		}
		r, ok := texts[s]
		if !ok {
			r = uint32(len(syms))
			syms = append(syms, s)
			texts[s] = r
		}
		return r
	}
	req := &writev2.Request{Timeseries: make([]*writev2.TimeSeries, n)}
	series := make([]writev2.TimeSeries, n)
	samples := make([]writev2.Sample, n)
	samplePtrs := make([]*writev2.Sample, n)
	mds := make([]writev2.Metadata, n)
	refs := make([]uint32, 0, nrefs)
	var fam *famMeta // the last series' family, and its help and unit refs
	var helpRef, unitRef uint32
	for i, id := range ids {
		start := len(refs)
		for _, g := range y.of[id] {
			refs = append(refs, y.symbolize(&syms, g))
		}
		md := &mds[i]
		if f := p.tab.info[id].fam; f != nil {
			if f != fam {
				fam, helpRef, unitRef = f, text(f.help), text(f.unit)
			}
			md.Type, md.HelpRef, md.UnitRef = rw2Types[f.typ], helpRef, unitRef
		}
		ts := &series[i]
		ts.LabelsRefs, ts.Metadata = refs[start:len(refs):len(refs)], md
		if h := p.histAt(b, b.done+i, id, values[i]); h != nil {
			ts.Histograms = []*writev2.Histogram{rw2Hist(h)}
		} else {
			samples[i].Value, samples[i].Timestamp = values[i], b.ts
			samplePtrs[i] = &samples[i]
			ts.Samples = samplePtrs[i : i+1 : i+1]
		}
		req.Timeseries[i] = ts
	}
	req.Symbols = syms
	return req
}

// otlpResource is the OTLP resource of the external labels, as the
// OpenTelemetry Prometheus compatibility specification maps a target's
// labels: job is service.name, instance service.instance.id, the others
// keep their names.
func otlpResource(external []prompb.Label) *resourcepb.Resource {
	r := &resourcepb.Resource{}
	for _, l := range external {
		k := l.Name
		switch k {
		case "job":
			k = "service.name"
		case "instance":
			k = "service.instance.id"
		}
		r.Attributes = append(r.Attributes, kv(k, l.Value))
	}
	return r
}

func kv(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

const noRecordedValue = uint32(metricspb.DataPointFlags_DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK)

// otlpPoint gathers a histogram's or a summary's series into one data
// point.
type otlpPoint struct {
	bounds     []float64 // histogram: the le of each bucket, +Inf last
	cum        []float64 // histogram: cumulative counts; summary: quantile values
	sum, count float64
	start      int64
	stale      bool
	hist       *metricspb.HistogramDataPoint
	summ       *metricspb.SummaryDataPoint
}

// encodeOTLP is an OTLP ExportMetricsServiceRequest: one resource (the
// external labels), one metric per family, gauges and untyped as Gauge,
// counters as cumulative monotonic Sum, classic histograms as
// explicit-bucket Histogram, native histograms as cumulative
// ExponentialHistogram (expPoint), summaries as Summary. A series' labels other
// than the external ones are its data point's attributes. A staleness
// marker becomes a data point flagged NoRecordedValue. p.mu is held.
func (p *Pusher) encodeOTLP(b *snapshot, n int) *colmetricpb.ExportMetricsServiceRequest {
	ids, values := b.ids[b.done:b.done+n], b.values[b.done:b.done+n]
	tsNano := uint64(b.ts) * uint64(time.Millisecond)
	numbers := numberPoints{points: make([]metricspb.NumberDataPoint, 0, n), values: make([]metricspb.NumberDataPoint_AsDouble, 0, n)}
	metrics := map[*famMeta]*metricspb.Metric{}
	expMetrics := map[*famMeta]*metricspb.Metric{} // native histograms
	var order []*metricspb.Metric
	points := map[string]*otlpPoint{}
	var pointOrder []*otlpPoint
	var key strings.Builder
	for i, id := range ids {
		in := p.tab.info[id]
		f := in.fam
		if f == nil {
			continue
		}
		v := values[i]
		stale := value.IsStaleNaN(v)
		h := p.histAt(b, b.done+i, id, v)
		m := metrics[f]
		if m == nil && h == nil {
			m = &metricspb.Metric{Name: f.name, Description: f.help, Unit: f.unit}
			switch f.typ {
			case pluginv1.MetricType_METRIC_TYPE_COUNTER:
				m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, IsMonotonic: true}}
			case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
				m.Data = &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE}}
			case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
				m.Data = &metricspb.Metric_Summary{Summary: &metricspb.Summary{}}
			default:
				m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{}}
			}
			metrics[f] = m
			order = append(order, m)
		}
		ls := p.tab.labels[id]
		if h != nil {
			// A native histogram: an ExponentialHistogram metric of
			// the family, besides the Histogram of its classic ones.
			e := expMetrics[f]
			if e == nil {
				e = &metricspb.Metric{Name: f.name, Description: f.help, Unit: f.unit, Data: &metricspb.Metric_ExponentialHistogram{ExponentialHistogram: &metricspb.ExponentialHistogram{
					AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE}}}
				expMetrics[f] = e
				order = append(order, e)
			}
			start := p.tab.startOf(id, b.ts, v)
			var dp *metricspb.ExponentialHistogramDataPoint
			if stale {
				dp = &metricspb.ExponentialHistogramDataPoint{TimeUnixNano: tsNano, StartTimeUnixNano: uint64(start) * uint64(time.Millisecond), Flags: noRecordedValue}
			} else {
				dp = expPoint(h, b.ts, start)
			}
			dp.ProtoReflect().SetUnknown(p.attrsOf(id, roleNative, pointExpHistogram))
			eh := e.Data.(*metricspb.Metric_ExponentialHistogram).ExponentialHistogram
			eh.DataPoints = append(eh.DataPoints, dp)
			continue
		}
		switch d := m.Data.(type) {
		case *metricspb.Metric_Gauge:
			d.Gauge.DataPoints = append(d.Gauge.DataPoints, p.numberPoint(&numbers, id, tsNano, v, stale))
		case *metricspb.Metric_Sum:
			dp := p.numberPoint(&numbers, id, tsNano, v, stale)
			dp.StartTimeUnixNano = uint64(p.tab.startOf(id, b.ts, v)) * uint64(time.Millisecond)
			d.Sum.DataPoints = append(d.Sum.DataPoints, dp)
		default: // a histogram's or a summary's series
			key.Reset()
			key.WriteString(f.name)
			for _, l := range ls {
				if l.Name == "__name__" || (in.role == roleBucket && l.Name == "le") || (in.role == roleQuantile && l.Name == "quantile") {
					continue
				}
				key.WriteByte(0xff)
				key.WriteString(l.Name)
				key.WriteByte(0xff)
				key.WriteString(l.Value)
			}
			pt := points[key.String()]
			if pt == nil {
				pt = &otlpPoint{}
				points[key.String()] = pt
				pointOrder = append(pointOrder, pt)
				if h, ok := d.(*metricspb.Metric_Histogram); ok {
					pt.hist = &metricspb.HistogramDataPoint{TimeUnixNano: tsNano}
					pt.hist.ProtoReflect().SetUnknown(p.attrsOf(id, in.role, pointHistogram))
					h.Histogram.DataPoints = append(h.Histogram.DataPoints, pt.hist)
				} else {
					s := d.(*metricspb.Metric_Summary)
					pt.summ = &metricspb.SummaryDataPoint{TimeUnixNano: tsNano}
					pt.summ.ProtoReflect().SetUnknown(p.attrsOf(id, in.role, pointSummary))
					s.Summary.DataPoints = append(s.Summary.DataPoints, pt.summ)
				}
			}
			if stale {
				pt.stale = true
			}
			switch in.role {
			case roleBucket, roleQuantile:
				pt.bounds, pt.cum = append(pt.bounds, in.bound), append(pt.cum, v)
			case roleSum:
				pt.sum = v
			case roleCount:
				pt.count = v
				pt.start = p.tab.startOf(id, b.ts, v)
			}
		}
	}
	for _, pt := range pointOrder {
		pt.finish()
	}
	return &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource:     p.resource,
		ScopeMetrics: []*metricspb.ScopeMetrics{{Scope: &commonpb.InstrumentationScope{Name: "plexporter"}, Metrics: order}},
	}}}
}

// finish fills the data point from the series gathered.
func (pt *otlpPoint) finish() {
	start := uint64(pt.start) * uint64(time.Millisecond)
	if h := pt.hist; h != nil {
		h.StartTimeUnixNano = start
		if pt.stale {
			h.Flags = noRecordedValue
			return
		}
		h.Count = uint64(pt.count)
		h.Sum = proto.Float64(pt.sum)
		prev := 0.0
		for j, ub := range pt.bounds {
			if !math.IsInf(ub, 1) {
				h.ExplicitBounds = append(h.ExplicitBounds, ub)
			}
			h.BucketCounts = append(h.BucketCounts, uint64(max(0, pt.cum[j]-prev)))
			prev = pt.cum[j]
		}
		return
	}
	s := pt.summ
	s.StartTimeUnixNano = start
	if pt.stale {
		s.Flags = noRecordedValue
		return
	}
	s.Count, s.Sum = uint64(pt.count), pt.sum
	for j, q := range pt.bounds {
		s.QuantileValues = append(s.QuantileValues, &metricspb.SummaryDataPoint_ValueAtQuantile{Quantile: q, Value: pt.cum[j]})
	}
}

// numberPoints are a request's number data points and their values,
// allocated together (a request has at most one a sample).
type numberPoints struct {
	points []metricspb.NumberDataPoint
	values []metricspb.NumberDataPoint_AsDouble
}

func (p *Pusher) numberPoint(all *numberPoints, id uint32, tsNano uint64, v float64, stale bool) *metricspb.NumberDataPoint {
	i := len(all.points)
	all.points, all.values = all.points[:i+1], all.values[:i+1]
	dp, val := &all.points[i], &all.values[i]
	val.AsDouble = v
	dp.TimeUnixNano, dp.Value = tsNano, val
	dp.ProtoReflect().SetUnknown(p.attrsOf(id, roleValue, pointNumber))
	if stale {
		dp.Flags = noRecordedValue
	}
	return dp
}

// Kinds of OTLP data points, whose attributes are different fields.
const (
	pointNumber uint8 = iota
	pointHistogram
	pointSummary
	pointExpHistogram
)

// attrsOf returns series id's data point attributes, for a data point of
// kind, as the protobuf encoding of that data point with its attributes
// alone (proto.Marshal's), made once and kept in the table while the
// series is. A data point carries them as its unknown fields, which
// proto.Marshal writes out as they are: the receiver reads its attributes
// field; the request's marshal does not encode every attribute's KeyValue
// and AnyValue again, push after push (requests share the bytes
// read-only). p.mu is held.
func (p *Pusher) attrsOf(id uint32, role, kind uint8) protoreflect.RawFields {
	t := p.tab
	if int(id) >= len(t.attrs) {
		n := int(id) + 1 - len(t.attrs)
		t.attrs, t.attrsFor = append(t.attrs, make([]protoreflect.RawFields, n)...), append(t.attrsFor, make([]uint8, n)...)
	}
	if tag := 1 + kind<<4 + role; t.attrsFor[id] != tag {
		attrs := p.attributes(t.labels[id], role)
		var m proto.Message
		switch kind {
		case pointHistogram:
			m = &metricspb.HistogramDataPoint{Attributes: attrs}
		case pointSummary:
			m = &metricspb.SummaryDataPoint{Attributes: attrs}
		case pointExpHistogram:
			m = &metricspb.ExponentialHistogramDataPoint{Attributes: attrs}
		default:
			m = &metricspb.NumberDataPoint{Attributes: attrs}
		}
		raw, err := proto.Marshal(m)
		if err != nil { // strings are valid UTF-8 (the guard's check)
			p.log.Error("push: cannot encode a series' OTLP attributes; the data point goes without them", "labels", t.labels[id], "err", err)
			raw = nil
		}
		t.attrs[id], t.attrsFor[id] = raw, tag
	}
	return t.attrs[id]
}

// attributes are a series' labels as data point attributes: without
// __name__, le of a bucket, quantile of a summary's quantile, and the
// external labels (the resource's).
func (p *Pusher) attributes(ls []prompb.Label, role uint8) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(ls))
	for _, l := range ls {
		switch {
		case l.Name == "__name__",
			role == roleBucket && l.Name == "le",
			role == roleQuantile && l.Name == "quantile",
			p.isExternal(l):
			continue
		}
		out = append(out, kv(l.Name, l.Value))
	}
	return out
}

func (p *Pusher) isExternal(l prompb.Label) bool {
	for _, e := range p.external {
		if e.Name == l.Name {
			return e.Value == l.Value
		}
	}
	return false
}

// startOf returns the start time (ms) of counter series id's sample v at
// ts, in send order: the time this pusher first sent the series, moved to
// ts when the value decreased (a reset) or after the series' staleness
// marker, as the OpenTelemetry Collector's
// Prometheus receiver does without a created timestamp. It is not the
// process's start: a series that comes later has its own. After a host
// restart it is the new process's first push (the Collector's limit
// too). t is held by the pusher's lock.
func (t *table) startOf(id uint32, ts int64, v float64) int64 {
	if value.IsStaleNaN(v) {
		// The series ended: if it comes back, it is a new one.
		s := t.start[id]
		t.start[id] = 0
		return s
	}
	if t.start[id] == 0 || v < t.prev[id] {
		t.start[id] = ts
	}
	t.prev[id] = v
	return t.start[id]
}

// otlpWrite posts an OTLP/HTTP request (post) and returns the answer's
// partial success.
func (p *Pusher) otlpWrite(ctx context.Context, req any, onRetry func(error)) (rejected int64, msg string, err error) {
	body, err := otlpPosted(req)
	if err != nil {
		return 0, "", err
	}
	data, err := p.post(ctx, body, func(h http.Header, _ int) {
		h.Set("Content-Type", "application/x-protobuf")
		h.Set("Content-Encoding", "gzip")
	}, otlpStatus, onRetry)
	if err != nil {
		return 0, "", err
	}
	var answer colmetricpb.ExportMetricsServiceResponse
	if err := proto.Unmarshal(data, &answer); err != nil {
		return 0, "", fmt.Errorf("decoding the answer (ExportMetricsServiceResponse): %w", err)
	}
	ps := answer.GetPartialSuccess()
	return ps.GetRejectedDataPoints(), ps.GetErrorMessage(), nil
}

// post posts body to the push URL, with the headers set sets (attempt:
// 0 first, then the retry's number), retrying network errors, 5xx and 429
// with exponential backoff and jitter between min_backoff and max_backoff
// (plus a Retry-After), until it is accepted or ctx ends; it never retries
// another 4xx. It returns the body of the 2xx answer; message is an error
// answer's message.
func (p *Pusher) post(ctx context.Context, body []byte, set func(h http.Header, attempt int), message func(http.Header, []byte) string, onRetry func(error)) ([]byte, error) {
	delay := p.cfg.MinBackoff
	for attempt := 0; ; attempt++ {
		var retryAfter time.Duration
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		set(r.Header, attempt)
		resp, err := p.client.Do(r)
		if err == nil {
			data, rerr := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
			code := resp.StatusCode
			switch {
			case code/100 == 2:
				if rerr != nil {
					return nil, fmt.Errorf("reading response body: %w", rerr)
				}
				return data, nil
			case code/100 == 5 || code == http.StatusTooManyRequests:
				err = fmt.Errorf("server returned HTTP status %s: %s", resp.Status, message(resp.Header, data))
				retryAfter = retryAfterDuration(resp.Header.Get("Retry-After"))
			default:
				return nil, fmt.Errorf("server returned HTTP status %s: %s", resp.Status, message(resp.Header, data))
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		onRetry(err)
		// Full jitter on the upper half: [delay/2, delay).
		d := delay/2 + rand.N(delay/2+1) + retryAfter
		sleep(ctx, d)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		delay = min(2*delay, p.cfg.MaxBackoff)
	}
}

// rw1Write posts a remote write 1.0 request (a *writeRequest, or a
// spooled one's rawMessage) as client_golang's remote.API.Write posts it
// (protobuf, snappy, the same headers, Retry-Attempt on a retry; post
// retries as it does), but with the snappy encoder Prometheus's own
// remote write client uses (the standard one, s2.EncodeSnappy) rather
// than the library's fixed EncodeSnappyBetter, which costs three times
// the CPU for a body 15% smaller (docs/design.md, "Remote write 1.0 is
// posted by the host"). The buffers are kept for the next request.
func (p *Pusher) rw1Write(ctx context.Context, req any, onRetry func(error)) error {
	rawp, zp := rw1Bufs.Get().(*[]byte), rw1Bufs.Get().(*[]byte)
	defer rw1Bufs.Put(rawp)
	defer rw1Bufs.Put(zp)
	body, err := rw1Body(req, rawp, zp)
	if err != nil {
		return err
	}
	_, err = p.post(ctx, body, func(h http.Header, attempt int) {
		h.Set("Content-Encoding", "snappy")
		h.Set("Content-Type", "application/x-protobuf")
		h.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		if attempt > 0 {
			h.Set("Retry-Attempt", strconv.Itoa(attempt))
		}
	}, func(_ http.Header, data []byte) string { return string(data) }, onRetry)
	return err
}

// rw1Body is the body rw1Write posts for req: marshalled into *rawp,
// snappy-encoded into *zp (buffers grown as needed), valid while they are.
func rw1Body(req any, rawp, zp *[]byte) ([]byte, error) {
	var raw []byte
	switch r := req.(type) {
	case *writeRequest:
		n := r.Size()
		if cap(*rawp) < n {
			*rawp = make([]byte, n)
		}
		raw = (*rawp)[:n]
		if _, err := r.MarshalToSizedBuffer(raw); err != nil {
			return nil, fmt.Errorf("encoding request %w", err)
		}
	case rawMessage:
		raw = r
	default:
		return nil, fmt.Errorf("push: no remote write 1.0 body for %T", req)
	}
	m := s2.MaxEncodedLen(len(raw))
	if m < 0 {
		return nil, fmt.Errorf("push: a request of %d bytes is too large for snappy", len(raw))
	}
	if cap(*zp) < m {
		*zp = make([]byte, m)
	}
	return s2.EncodeSnappy((*zp)[:cap(*zp)], raw), nil
}

// rw1Bufs are rw1Write's buffers: a request marshalled, and snappy-encoded.
var rw1Bufs = sync.Pool{New: func() any { return new([]byte) }}

// otlpBody is req marshalled and gzipped, as the OpenTelemetry
// Collector's otlphttp exporter sends by default and every OTLP/HTTP
// receiver takes. The marshalled request is in a buffer kept for the next
// (as client_golang's remote write client keeps its own); the gzip writer
// is klauspost/compress's, the one client_golang's remote write client
// takes its snappy from (the standard library's costs about twice the
// CPU at BestSpeed).
func otlpBody(req *colmetricpb.ExportMetricsServiceRequest) ([]byte, error) {
	rawp, _ := otlpBufs.Get().(*[]byte)
	if rawp == nil {
		rawp = new([]byte)
	}
	defer otlpBufs.Put(rawp)
	raw, err := proto.MarshalOptions{}.MarshalAppend((*rawp)[:0], req)
	if err != nil {
		return nil, fmt.Errorf("encoding request %w", err)
	}
	*rawp = raw
	var zbuf bytes.Buffer
	zw, _ := gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		zw, _ = gzip.NewWriterLevel(&zbuf, gzip.BestSpeed)
	} else {
		zw.Reset(&zbuf)
	}
	defer gzipWriters.Put(zw)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing request %w", err)
	}
	return zbuf.Bytes(), nil
}

// gzipWriters keeps writers (a megabyte each) from one request to the
// next, otlpBufs the marshalled requests' buffers.
var gzipWriters, otlpBufs sync.Pool

// otlpStatus is the message of an OTLP error answer: a google.rpc.Status
// when protobuf, else the body.
func otlpStatus(h http.Header, data []byte) string {
	if strings.HasPrefix(h.Get("Content-Type"), "application/x-protobuf") {
		var st statuspb.Status
		if proto.Unmarshal(data, &st) == nil && st.GetMessage() != "" {
			return st.GetMessage()
		}
	}
	return string(data)
}

// retryAfterDuration reads a Retry-After header (seconds or an HTTP date);
// 0 when absent or unreadable.
func retryAfterDuration(s string) time.Duration {
	if s == "" {
		return 0
	}
	if t, err := http.ParseTime(s); err == nil {
		return max(0, time.Until(t))
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// errNoWrittenHeader: a remote write 2.0 request answered 2xx without
// the header that says how many samples were written.
var errNoWrittenHeader = errors.New("the receiver answered 2xx without X-Prometheus-Remote-Write-Samples-Written: it takes remote write 1.0 only (Prometheus before 3.0, or without --web.remote-write-receiver.accepted-protobuf-messages=io.prometheus.write.v2.Request); set push.protocol to prometheus.remote_write.v1, or enable 2.0 on the receiver")

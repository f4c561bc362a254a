package push

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	gproto "google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/host/internal/config"
)

// answering serves the answers in turn (then next), as receiver does.
type answering struct {
	mu      sync.Mutex
	answers []func(http.ResponseWriter)
	next    http.Handler
}

func (a *answering) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	var f func(http.ResponseWriter)
	if len(a.answers) > 0 {
		f, a.answers = a.answers[0], a.answers[1:]
	}
	a.mu.Unlock()
	if f != nil {
		io.Copy(io.Discard, r.Body)
		f(w)
		return
	}
	a.next.ServeHTTP(w, r)
}

// rw2Store is the storage behind client_golang's remote write handler:
// it keeps every remote write 2.0 series it gets, labels desymbolized.
type rw2Store struct {
	mu      sync.Mutex
	series  []rw2Series
	headers []http.Header
}

type rw2Series struct {
	labels    map[string]string
	value     float64
	ts        int64
	typ       writev2.Metadata_MetricType
	help      string
	unit      string
	labelSets []string
	hist      *writev2.Histogram // a histogram sample (value and ts unset)
}

func (s *rw2Store) Store(r *http.Request, _ remote.WriteMessageType) (*remote.WriteResponse, error) {
	resp := remote.NewWriteResponse()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		resp.SetStatusCode(http.StatusBadRequest)
		return resp, err
	}
	var req writev2.Request
	if err := req.UnmarshalVT(body); err != nil {
		resp.SetStatusCode(http.StatusBadRequest)
		return resp, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headers = append(s.headers, r.Header.Clone())
	n, nh := 0, 0
	for _, ts := range req.Timeseries {
		ls := writev2.DesymbolizeLabels(ts.LabelsRefs, req.Symbols, nil)
		m := map[string]string{}
		for i := 0; i+1 < len(ls); i += 2 {
			m[ls[i]] = ls[i+1]
		}
		md := ts.GetMetadata()
		for _, smp := range ts.Samples {
			s.series = append(s.series, rw2Series{labels: m, value: smp.Value, ts: smp.Timestamp, typ: md.GetType(), help: req.Symbols[md.GetHelpRef()], unit: req.Symbols[md.GetUnitRef()]})
			n++
		}
		for _, h := range ts.Histograms {
			s.series = append(s.series, rw2Series{labels: m, hist: h, typ: md.GetType(), help: req.Symbols[md.GetHelpRef()], unit: req.Symbols[md.GetUnitRef()]})
			nh++
		}
	}
	resp.Add(remote.WriteResponseStats{Samples: n, Histograms: nh})
	return resp, nil
}

// header returns the i-th request's headers (the pusher may still be
// sending: read under the lock).
func (s *rw2Store) header(i int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[i]
}

func (s *rw2Store) got() []rw2Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.series)
}

func labelMap(ls []prompb.Label) map[string]string {
	m := map[string]string{}
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

// withUnit gives the counter family of mixed a unit.
func withUnit(mfs []*dto.MetricFamily) []*dto.MetricFamily {
	for _, mf := range mfs {
		if mf.GetType() == dto.MetricType_COUNTER {
			mf.Unit = proto.String("bytes")
		}
	}
	return mfs
}

// TestRemoteWrite2ReceivesTheSnapshot pushes every kind of family with
// remote write 2.0 to client_golang's remote write handler and compares
// each series, its metadata and timestamp with what the scrape path
// serves; then a device disappears and its series get staleness markers.
func TestRemoteWrite2ReceivesTheSnapshot(t *testing.T) {
	store := &rw2Store{}
	h := &answering{answers: []func(http.ResponseWriter){status(503), status(429, "Retry-After", "0")},
		next: remote.NewWriteHandler(store, remote.MessageTypes{remote.WriteV2MessageType})}
	srv := httptest.NewServer(h)
	defer srv.Close()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var snap atomic.Int32
	p := newPusher(t, srv.URL+"/api/v1/write", func(context.Context) []*dto.MetricFamily {
		if snap.Add(1) == 1 {
			return withUnit(mixed("mlx5_0", "mlx5_1"))
		}
		return withUnit(mixed("mlx5_0"))
	}, func(c *config.Push) {
		c.Protocol = config.PushRemoteWriteV2
		c.ExternalLabels = map[string]string{"job": "push-test", "instance": "node-1"}
	})
	p.now = func() time.Time { return base.Add(time.Duration(snap.Load()) * time.Second) }
	p.Snapshot(context.Background())
	p.Snapshot(context.Background())
	stop := runPusher(p)
	defer stop()
	want := flattened(t, withUnit(mixed("mlx5_0", "mlx5_1")), p.external)
	waitFor(t, "two snapshots received", func() bool { return len(store.got()) >= 2*len(want) })
	got := store.got()
	if f := metric(t, p, "plexporter_push_samples_failed_total"); f != float64(2*len(want)) {
		t.Errorf("failed_total %v, want %d (the 503 and the 429, retried)", f, 2*len(want))
	}
	hdr := store.header(0)
	if hdr.Get("Content-Type") != "application/x-protobuf;proto=io.prometheus.write.v2.Request" || hdr.Get("X-Prometheus-Remote-Write-Version") != "2.0.0" || hdr.Get("Content-Encoding") != "" {
		t.Errorf("headers %v: want remote write 2.0's (the handler has decoded snappy)", hdr)
	}
	wantType := map[string]writev2.Metadata_MetricType{"node_temp_celsius": writev2.Metadata_METRIC_TYPE_GAUGE, "port_rcv_bytes_total": writev2.Metadata_METRIC_TYPE_COUNTER,
		"io_latency_seconds": writev2.Metadata_METRIC_TYPE_HISTOGRAM, "rpc_seconds": writev2.Metadata_METRIC_TYPE_SUMMARY}
	// The first snapshot: every series, in the scrape path's order.
	for i, w := range want {
		g := got[i]
		if k, gk := labelKey(labelMap(w.labels)), labelKey(g.labels); k != gk || g.value != w.value || g.ts != base.UnixMilli() {
			t.Errorf("series %d: got %s = %v at %d, want %s = %v at %d", i, gk, g.value, g.ts, k, w.value, base.UnixMilli())
			continue
		}
		fam := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(g.labels["__name__"], "_bucket"), "_sum"), "_count")
		wantUnit := ""
		if fam == "port_rcv_bytes_total" {
			wantUnit = "bytes"
		}
		if g.typ != wantType[fam] || g.help != "h" || g.unit != wantUnit {
			t.Errorf("%s: metadata %v %q %q, want %v %q %q", labelKey(g.labels), g.typ, g.help, g.unit, wantType[fam], "h", wantUnit)
		}
	}
	// The second: mlx5_0's series, then a staleness marker for each of
	// mlx5_1's, one timestamp later.
	second := got[len(want) : 2*len(want)]
	for _, g := range second {
		stale := value.IsStaleNaN(g.value)
		if g.ts != base.Add(time.Second).UnixMilli() || stale != (g.labels["device"] == "mlx5_1") {
			t.Errorf("second snapshot: %s = %v at %d", labelKey(g.labels), g.value, g.ts)
		}
	}
	// The receiver stored the samples before it answered; the pusher
	// counts them once it has read the answer.
	waitFor(t, "sent_total to count both snapshots", func() bool {
		return metric(t, p, "plexporter_push_samples_sent_total") >= float64(2*len(want))
	})
}

// TestRemoteWrite2ToA1OnlyReceiver: a receiver that answers 2xx without
// the written-samples header did not take 2.0; the samples are dropped
// (rejected), not sent again forever.
func TestRemoteWrite2ToA1OnlyReceiver(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	p := newPusher(t, srv.URL, func(context.Context) []*dto.MetricFamily { return gauges("g", "a", "b") }, func(c *config.Push) { c.Protocol = config.PushRemoteWriteV2 })
	stop := runPusher(p)
	waitFor(t, "the samples dropped", func() bool { return metric(t, p, "plexporter_push_samples_dropped_total", "reason", "rejected") == 2 })
	stop()
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// otlpReceiver decodes OTLP/HTTP requests with the OTLP protos and
// answers with their response message.
type otlpReceiver struct {
	mu       sync.Mutex
	reqs     []*colmetricpb.ExportMetricsServiceRequest
	headers  []http.Header
	rejected int64 // partial success: rejected data points, in every answer
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req colmetricpb.ExportMetricsServiceRequest
	if r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "want POST /v1/metrics, application/x-protobuf, gzip", http.StatusUnsupportedMediaType)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(zr)
	if err := gproto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.reqs = append(o.reqs, &req)
	o.headers = append(o.headers, r.Header.Clone())
	resp := &colmetricpb.ExportMetricsServiceResponse{}
	if o.rejected > 0 {
		resp.PartialSuccess = &colmetricpb.ExportMetricsPartialSuccess{RejectedDataPoints: o.rejected, ErrorMessage: "too many attributes"}
	}
	o.mu.Unlock()
	out, _ := gproto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (o *otlpReceiver) requests() []*colmetricpb.ExportMetricsServiceRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.reqs)
}

// otlpSeries is an OTLP point as the Prometheus series it stands for
// (the reverse of the push's mapping), by labelKey, with its flags and
// start time.
type otlpSeries struct {
	value float64
	ts    uint64
	start uint64
	flags uint32
	kind  string
}

func fromOTLP(t *testing.T, reqs []*colmetricpb.ExportMetricsServiceRequest) []map[string]otlpSeries {
	t.Helper()
	var out []map[string]otlpSeries
	for _, req := range reqs {
		got := map[string]otlpSeries{}
		for _, rm := range req.ResourceMetrics {
			res := map[string]string{}
			for _, a := range rm.GetResource().GetAttributes() {
				k := a.Key
				switch k {
				case "service.name":
					k = "job"
				case "service.instance.id":
					k = "instance"
				}
				res[k] = a.GetValue().GetStringValue()
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					add := func(name string, attrs map[string]string, extra, extraVal string, v float64, ts, start uint64, flags uint32, kind string) {
						l := map[string]string{"__name__": name}
						for k, v := range res {
							l[k] = v
						}
						for k, v := range attrs {
							l[k] = v
						}
						if extra != "" {
							l[extra] = extraVal
						}
						got[labelKey(l)] = otlpSeries{value: v, ts: ts, start: start, flags: flags, kind: kind}
					}
					attrs := func(kvs []*commonpb.KeyValue) map[string]string {
						a := map[string]string{}
						for _, kv := range kvs {
							a[kv.Key] = kv.GetValue().GetStringValue()
						}
						return a
					}
					switch d := m.Data.(type) {
					case *metricspb.Metric_Gauge:
						for _, dp := range d.Gauge.DataPoints {
							add(m.Name, attrs(dp.Attributes), "", "", dp.GetAsDouble(), dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "gauge")
						}
					case *metricspb.Metric_Sum:
						if !d.Sum.IsMonotonic || d.Sum.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
							t.Errorf("%s: sum not cumulative monotonic", m.Name)
						}
						for _, dp := range d.Sum.DataPoints {
							add(m.Name, attrs(dp.Attributes), "", "", dp.GetAsDouble(), dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "sum")
						}
					case *metricspb.Metric_Histogram:
						for _, dp := range d.Histogram.DataPoints {
							a := attrs(dp.Attributes)
							cum := uint64(0)
							for j, c := range dp.BucketCounts {
								cum += c
								le := "+Inf"
								if j < len(dp.ExplicitBounds) {
									le = formatFloat(dp.ExplicitBounds[j])
								}
								add(m.Name+"_bucket", a, "le", le, float64(cum), dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "histogram")
							}
							add(m.Name+"_sum", a, "", "", dp.GetSum(), dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "histogram")
							add(m.Name+"_count", a, "", "", float64(dp.Count), dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "histogram")
						}
					case *metricspb.Metric_Summary:
						for _, dp := range d.Summary.DataPoints {
							a := attrs(dp.Attributes)
							for _, q := range dp.QuantileValues {
								add(m.Name, a, "quantile", formatFloat(q.Quantile), q.Value, dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "summary")
							}
							add(m.Name+"_sum", a, "", "", dp.Sum, dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "summary")
							add(m.Name+"_count", a, "", "", float64(dp.Count), dp.TimeUnixNano, dp.StartTimeUnixNano, dp.Flags, "summary")
						}
					default:
						t.Errorf("%s: unexpected data %T", m.Name, d)
					}
				}
			}
		}
		out = append(out, got)
	}
	return out
}

// TestOTLPReceivesTheSnapshot pushes every kind of family with OTLP to a
// receiver decoding the OTLP protos, maps what arrived back to Prometheus
// series and compares them with what the scrape path serves; checks the
// counter's start time across pushes and a decrease, the
// NoRecordedValue flag when a device disappears, and the retries.
func TestOTLPReceivesTheSnapshot(t *testing.T) {
	rc := &otlpReceiver{}
	srv := httptest.NewServer(&answering{answers: []func(http.ResponseWriter){status(503), status(429, "Retry-After", "0")}, next: rc})
	defer srv.Close()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	counters := []float64{1e12, 1e12 + 5, 7, 9} // a reset between the second and the third
	var snap atomic.Int32
	src := func(k int) []*dto.MetricFamily {
		k = min(k, 4) // Run's own snapshot is the fourth again
		devs := []string{"mlx5_0", "mlx5_1"}
		if k == 2 {
			devs = devs[:1]
		}
		mfs := withUnit(mixed(devs...))
		for _, mf := range mfs {
			if mf.GetType() == dto.MetricType_COUNTER {
				mf.Metric[0].Counter.Value = proto.Float64(counters[k-1])
			}
		}
		return mfs
	}
	p := newPusher(t, srv.URL+"/v1/metrics", func(context.Context) []*dto.MetricFamily { return src(int(snap.Add(1))) }, func(c *config.Push) {
		c.Protocol = config.PushOTLP
		c.ExternalLabels = map[string]string{"job": "push-test", "instance": "node-1", "cluster": "c1"}
		c.MaxSamplesPerSend = 3 // a request holds whole data points still
	})
	p.now = func() time.Time { return base.Add(time.Duration(snap.Load()) * time.Second) }
	for range 4 {
		p.Snapshot(context.Background())
	}
	stop := runPusher(p)
	defer stop()
	waitFor(t, "every sample sent", func() bool {
		return metric(t, p, "plexporter_push_pending_samples") == 0 && metric(t, p, "plexporter_push_samples_sent_total") > 0
	})
	if f := metric(t, p, "plexporter_push_samples_failed_total"); f == 0 {
		t.Error("failed_total 0: the 503 and 429 were not retried")
	}
	reqs := rc.requests()
	// Group the requests' series by their timestamp: one map a snapshot.
	bySnap := map[uint64]map[string]otlpSeries{}
	for _, got := range fromOTLP(t, reqs) {
		for k, s := range got {
			if bySnap[s.ts] == nil {
				bySnap[s.ts] = map[string]otlpSeries{}
			}
			if _, dup := bySnap[s.ts][k]; dup {
				t.Errorf("%s twice at %d", k, s.ts)
			}
			bySnap[s.ts][k] = s
		}
	}
	nano := func(k int) uint64 { return uint64(base.Add(time.Duration(k-1) * time.Second).UnixNano()) }
	var starts []uint64
	for k := 1; k <= 4; k++ {
		got := bySnap[nano(k)]
		want := flattened(t, src(k), p.external)
		for _, w := range want {
			key := labelKey(labelMap(w.labels))
			g, ok := got[key]
			if !ok || g.value != w.value || g.flags != 0 {
				t.Errorf("snapshot %d: %s: got %v (present %v, flags %d), want %v", k, key, g.value, ok, g.flags, w.value)
			}
			delete(got, key)
			if w.labels[0].Value == "port_rcv_bytes_total" && labelMap(w.labels)["device"] == "mlx5_0" {
				starts = append(starts, g.start)
			}
			if w.labels[0].Value == "port_rcv_bytes_total" && labelMap(w.labels)["device"] == "mlx5_1" && g.start != nano(min(k, 3)) {
				t.Errorf("snapshot %d: mlx5_1's counter starts at %d, want %d (first seen; seen again after its staleness marker)", k, g.start, nano(min(k, 3)))
			}
		}
		for key, g := range got {
			// What is left: mlx5_1's points in snapshot 2, flagged.
			if k != 2 || !strings.Contains(key, "mlx5_1") || g.flags != noRecordedValue {
				t.Errorf("snapshot %d: unexpected %s %+v", k, key, g)
			}
			delete(got, key)
		}
	}
	if want := []uint64{nano(1), nano(1), nano(3), nano(3)}; !slices.Equal(starts, want) {
		t.Errorf("counter start times %v, want %v (first seen, kept, moved at the decrease)", starts, want)
	}
	// Snapshot 2 marks each of mlx5_1's data points: gauge, counter,
	// histogram, summary.
	if n := countFlagged(reqs); n != 4 {
		t.Errorf("%d data points flagged NoRecordedValue, want 4", n)
	}
	// Types, units and the histogram's buckets as OTLP has them.
	var hist *metricspb.HistogramDataPoint
	for _, req := range reqs {
		for _, m := range req.ResourceMetrics[0].ScopeMetrics[0].Metrics {
			if m.Name == "port_rcv_bytes_total" && (m.Unit != "bytes" || m.Description != "h") {
				t.Errorf("counter metric %q %q", m.Unit, m.Description)
			}
			if h := m.GetHistogram(); h != nil && hist == nil {
				hist = h.DataPoints[0]
			}
		}
	}
	if hist == nil || !slices.Equal(hist.ExplicitBounds, []float64{0.001, 0.1}) || !slices.Equal(hist.BucketCounts, []uint64{2, 4, 1}) || hist.Count != 7 || hist.GetSum() != 0.25 {
		t.Errorf("histogram point %v: want bounds [0.001 0.1], counts [2 4 1], count 7, sum 0.25", hist)
	}
	if len(reqs[0].ResourceMetrics[0].Resource.Attributes) != 3 {
		t.Errorf("resource %v", reqs[0].ResourceMetrics[0].Resource)
	}
}

func countFlagged(reqs []*colmetricpb.ExportMetricsServiceRequest) int {
	n := 0
	for _, req := range reqs {
		for _, m := range req.ResourceMetrics[0].ScopeMetrics[0].Metrics {
			var flags []uint32
			switch d := m.Data.(type) {
			case *metricspb.Metric_Gauge:
				for _, dp := range d.Gauge.DataPoints {
					flags = append(flags, dp.Flags)
				}
			case *metricspb.Metric_Sum:
				for _, dp := range d.Sum.DataPoints {
					flags = append(flags, dp.Flags)
				}
			case *metricspb.Metric_Histogram:
				for _, dp := range d.Histogram.DataPoints {
					flags = append(flags, dp.Flags)
				}
			case *metricspb.Metric_Summary:
				for _, dp := range d.Summary.DataPoints {
					flags = append(flags, dp.Flags)
				}
			}
			for _, f := range flags {
				if f&noRecordedValue != 0 {
					n++
				}
			}
		}
	}
	return n
}

// TestOTLPRejectionsAndPartialSuccess: a 400 is not retried, and a
// partial success's rejected points are counted as dropped.
func TestOTLPRejectionsAndPartialSuccess(t *testing.T) {
	rc := &otlpReceiver{rejected: 1}
	a := &answering{answers: []func(http.ResponseWriter){status(400)}, next: rc}
	srv := httptest.NewServer(a)
	defer srv.Close()
	p := newPusher(t, srv.URL+"/v1/metrics", func(context.Context) []*dto.MetricFamily { return gauges("g", "a", "b", "c") }, func(c *config.Push) { c.Protocol = config.PushOTLP })
	p.Snapshot(context.Background()) // rejected: 400
	p.Snapshot(context.Background()) // one of three points rejected
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Run(ctx) // flushes both
	if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "rejected"); got != 4 {
		t.Errorf("dropped{rejected} %v, want 4 (3 by the 400, 1 by the partial success)", got)
	}
	if got := metric(t, p, "plexporter_push_samples_sent_total"); got != 2 {
		t.Errorf("sent %v, want 2", got)
	}
	if got := metric(t, p, "plexporter_push_samples_failed_total"); got != 0 {
		t.Errorf("failed %v: a 400 is not retried", got)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("the OTLP receiver decoded %d requests, want 1", n)
	}
}

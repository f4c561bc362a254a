package push

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// gauges returns one gauge family with a series per device.
func gauges(name string, devices ...string) []*dto.MetricFamily {
	mf := &dto.MetricFamily{Name: proto.String(name), Help: proto.String("h"), Type: dto.MetricType_GAUGE.Enum()}
	for i, d := range devices {
		mf.Metric = append(mf.Metric, &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("device"), Value: proto.String(d)}}, Gauge: &dto.Gauge{Value: proto.Float64(float64(i + 1))}})
	}
	return []*dto.MetricFamily{mf}
}

// receiver is a remote write endpoint that decodes what it gets and
// answers with the statuses of answers in turn (then 204).
type receiver struct {
	mu       sync.Mutex
	answers  []func(w http.ResponseWriter)
	requests int
	got      []prompb.TimeSeries
	headers  []http.Header
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	rc.headers = append(rc.headers, r.Header.Clone())
	if len(rc.answers) > 0 {
		a := rc.answers[0]
		rc.answers = rc.answers[1:]
		a(w)
		return
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var req prompb.WriteRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	rc.got = append(rc.got, req.Timeseries...)
	w.WriteHeader(http.StatusNoContent)
}

// header returns the i-th request's headers (the pusher may still be
// sending: read under the lock).
func (rc *receiver) header(i int) http.Header {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.headers[i]
}

func (rc *receiver) count() (requests, series int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.requests, len(rc.got)
}

func status(code int, hdr ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, "answer "+http.StatusText(code))
	}
}

// merged runs client_model families through the host's own path for
// its self-metrics: the wire encoder, then the guard.
func merged(t testing.TB, mfs []*dto.MetricFamily) []*guard.Family {
	t.Helper()
	var rec wire.Recorder
	all, err := metricfilter.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := wire.NewEncoder(0, false, rec.Send)
	wire.WriteFamilies(enc, mfs, "", all.Allow)
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	res := guard.Merge([]guard.Input{{Plugin: "test", Batches: rec.Batches, MaxSeries: 1 << 30}}, guard.Options{MaxLabelValueLen: 4096})
	return res.Families
}

func newPusher(t testing.TB, url string, dtoSrc func(context.Context) []*dto.MetricFamily, mod func(*config.Push)) *Pusher {
	t.Helper()
	src := func(ctx context.Context) []*guard.Family { return merged(t, dtoSrc(ctx)) }
	c := config.Push{URL: url, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Interval: time.Hour}
	c.HTTPClientConfig.FollowRedirects = true
	if mod != nil {
		mod(&c)
	}
	p, err := New(c, src, "plexporter-test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls ok with a generous deadline: only a failing test waits it
// out.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func metric(t *testing.T, p *Pusher, name string, labels ...string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue next
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

// runPusher starts p.Run and returns a function that stops it and waits.
func runPusher(p *Pusher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func TestRetriesOn503And429ThenSucceeds(t *testing.T) {
	rc := &receiver{answers: []func(http.ResponseWriter){status(503), status(429, "Retry-After", "1"), status(500)}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p := newPusher(t, srv.URL+"/api/v1/write", func(context.Context) []*dto.MetricFamily { return gauges("g", "a", "b") }, nil)
	stop := runPusher(p)
	defer stop()
	waitFor(t, "the samples accepted", func() bool { return metric(t, p, "plexporter_push_samples_sent_total") == 2 })
	if req, series := rc.count(); req != 4 || series != 2 {
		t.Fatalf("receiver saw %d requests and %d series, want 4 (503, 429, 500, 204) and 2", req, series)
	}
	if got := metric(t, p, "plexporter_push_samples_failed_total"); got != 6 {
		t.Errorf("failed_total %v, want 6 (three failed attempts of 2 samples)", got)
	}
	if got := metric(t, p, "plexporter_push_pending_samples"); got != 0 {
		t.Errorf("pending %v after success", got)
	}
	if metric(t, p, "plexporter_push_last_success_timestamp_seconds") == 0 {
		t.Error("last success time not set")
	}
	h := rc.header(1)
	if h.Get("Content-Encoding") != "snappy" || h.Get("X-Prometheus-Remote-Write-Version") != "0.1.0" || h.Get("Retry-Attempt") != "1" {
		t.Errorf("second request's headers %v: want remote write 1.0 (snappy, version 0.1.0) and Retry-Attempt 1", h)
	}
}

func TestRejected4xxIsNotRetried(t *testing.T) {
	rc := &receiver{answers: []func(http.ResponseWriter){status(400)}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var calls atomic.Int32
	p := newPusher(t, srv.URL, func(context.Context) []*dto.MetricFamily {
		calls.Add(1)
		return gauges("g", "a", "b", "c")
	}, nil)
	p.Snapshot(context.Background()) // the receiver rejects this one
	p.Snapshot(context.Background()) // and takes this one
	stop := runPusher(p)             // Run takes a third
	waitFor(t, "two batches accepted", func() bool { return metric(t, p, "plexporter_push_samples_sent_total") == 6 })
	stop()
	if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "rejected"); got != 3 {
		t.Errorf("dropped{rejected} %v, want 3", got)
	}
	if got := metric(t, p, "plexporter_push_samples_failed_total"); got != 0 {
		t.Errorf("failed_total %v: a 400 must not be retried", got)
	}
	if req, _ := rc.count(); req != 3 {
		t.Errorf("receiver saw %d requests, want 3 (the 400 once, then two batches)", req)
	}
}

func TestHeadersAndExternalLabels(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p := newPusher(t, srv.URL, func(context.Context) []*dto.MetricFamily { return gauges("g", "a") }, func(c *config.Push) {
		c.Headers = map[string]string{"X-Scope-OrgID": "team-a"}
		c.ExternalLabels = map[string]string{"cluster": "c1", "device": "not-this"}
	})
	stop := runPusher(p)
	waitFor(t, "one series", func() bool { _, n := rc.count(); return n == 1 })
	stop()
	if got := rc.header(0).Get("X-Scope-OrgID"); got != "team-a" {
		t.Errorf("X-Scope-OrgID %q", got)
	}
	want := []prompb.Label{{Name: "__name__", Value: "g"}, {Name: "cluster", Value: "c1"}, {Name: "device", Value: "a"}}
	if got := rc.got[0].Labels; !slices.EqualFunc(got, want, func(x, y prompb.Label) bool { return x.Name == y.Name && x.Value == y.Value }) {
		t.Errorf("labels %v, want %v (sorted; the series' own device wins over the external label)", got, want)
	}
}

func TestStalenessMarkers(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	snaps := [][]string{{"a", "b", "c"}, {"a", "c"}, {"a", "c"}, {"a", "b"}}
	var i atomic.Int32
	p := newPusher(t, srv.URL, func(context.Context) []*dto.MetricFamily {
		return gauges("g", snaps[min(int(i.Add(1)), len(snaps))-1]...)
	}, nil)
	for range snaps {
		p.Snapshot(context.Background())
	}
	stop := runPusher(p) // Run's first snapshot is snaps[3] again
	waitFor(t, "every sample", func() bool {
		return metric(t, p, "plexporter_push_pending_samples") == 0 && metric(t, p, "plexporter_push_samples_sent_total") > 0
	})
	stop()
	// Per snapshot, device → value ("stale" for the marker).
	var got []string
	for _, ts := range rc.got {
		v := ts.Samples[0].Value
		s := ts.Labels[1].Value + "="
		if value.IsStaleNaN(v) {
			s += "stale"
		} else {
			s += formatFloat(v)
		}
		got = append(got, s)
	}
	want := "a=1 b=2 c=3 | a=1 c=2 b=stale | a=1 c=2 | a=1 b=2 c=stale"
	if g := strings.Join(got, " "); !strings.HasPrefix(g, strings.ReplaceAll(want, "| ", "")) {
		t.Errorf("got  %s\nwant %s", g, want)
	}
	if math.Float64bits(staleNaN) != 0x7ff0000000000002 {
		t.Errorf("staleness marker %x", math.Float64bits(staleNaN))
	}
}

func TestRingDropsOldestWhenFull(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var n atomic.Int32
	p := newPusher(t, srv.URL, func(context.Context) []*dto.MetricFamily {
		mfs := gauges("g", "a", "b", "c")
		for _, m := range mfs[0].Metric {
			m.Gauge.Value = proto.Float64(float64(n.Load()))
		}
		n.Add(1)
		return mfs
	}, func(c *config.Push) { c.MaxPendingSamples = 7 })
	for range 4 { // snapshots 0..3 with nobody sending: 12 samples, over 7
		p.Snapshot(context.Background())
	}
	if got := metric(t, p, "plexporter_push_pending_samples"); got != 6 {
		t.Fatalf("pending %v, want 6 (the two newest snapshots)", got)
	}
	if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "ring_full"); got != 6 {
		t.Fatalf("dropped{ring_full} %v, want 6", got)
	}
	p.cfg.MaxPendingSamples = 100
	stop := runPusher(p) // sends 2, 3, then Run's own snapshot 4
	waitFor(t, "9 samples", func() bool { _, s := rc.count(); return s == 9 })
	stop()
	var got []string
	for _, ts := range rc.got {
		got = append(got, formatFloat(ts.Samples[0].Value))
	}
	if g := strings.Join(got, ","); g != "2,2,2,3,3,3,4,4,4" {
		t.Errorf("values in arrival order %s, want the newest two snapshots then the next, oldest first", g)
	}
	if metric(t, p, "plexporter_push_series") != 3 {
		t.Errorf("series table holds %v label sets, want 3", metric(t, p, "plexporter_push_series"))
	}
}

func TestShutdownFlushesAndCountsWhatItCannot(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p := newPusher(t, srv.URL, func(context.Context) []*dto.MetricFamily { return gauges("g", "a", "b") }, func(c *config.Push) { c.MaxSamplesPerSend = 1 })
	for range 3 {
		p.Snapshot(context.Background())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // shut down at once: Run snapshots nothing and flushes the 6 pending
	p.Run(ctx)
	if _, s := rc.count(); s != 6 {
		t.Errorf("receiver got %d samples, want the 6 pending at shutdown", s)
	}

	// A receiver that never answers 2xx: the flush gives up after its
	// timeout and counts the rest.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer down.Close()
	p = newPusher(t, down.URL, func(context.Context) []*dto.MetricFamily { return gauges("g", "a", "b") }, func(c *config.Push) { c.FlushTimeout = 100 * time.Millisecond })
	p.Snapshot(context.Background())
	p.Run(ctx)
	if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "shutdown"); got != 2 {
		t.Errorf("dropped{shutdown} %v, want 2", got)
	}
	if got := metric(t, p, "plexporter_push_pending_samples"); got != 0 {
		t.Errorf("pending %v after shutdown", got)
	}
}

// sample is one flattened series.
type sample struct {
	labels []prompb.Label
	value  float64
}

func flattened(t testing.TB, mfs []*dto.MetricFamily, external []prompb.Label) []sample {
	var out []sample
	flatten(merged(t, mfs), external, func(_ []byte, ls []prompb.Label, v float64) {
		out = append(out, sample{labels: slices.Clone(ls), value: v})
	})
	return out
}

// TestTableHashCollisions puts every key on one hash: the label sets
// must stay apart, be found again, and be freed.
func TestTableHashCollisions(t *testing.T) {
	tab := newTable()
	var got []uint32
	for _, k := range []string{"a", "b", "c", "a", "b", "c"} {
		got = append(got, tab.refHash([]byte(k), 42, []prompb.Label{{Name: "k", Value: k}}))
	}
	if got[0] == got[1] || got[1] == got[2] || got[0] == got[2] || got[0] != got[3] || got[1] != got[4] || got[2] != got[5] {
		t.Fatalf("ids under one hash: %v", got)
	}
	if tab.len() != 3 || len(tab.overflow) != 2 || tab.labels[got[1]][0].Value != "b" {
		t.Fatalf("len %d, overflow %d", tab.len(), len(tab.overflow))
	}
	tab.release(got[:3])
	if tab.len() != 3 {
		t.Fatalf("released once of twice: len %d", tab.len())
	}
	tab.release(got[3:])
	if tab.len() != 0 || len(tab.free) != 3 {
		t.Fatalf("after release: len %d, free %d", tab.len(), len(tab.free))
	}
	// The hash's first holder gone, the others are still found.
	a := tab.refHash([]byte("a"), 42, []prompb.Label{{Name: "k", Value: "a"}})
	b := tab.refHash([]byte("b"), 42, []prompb.Label{{Name: "k", Value: "b"}})
	tab.release([]uint32{a})
	if again := tab.refHash([]byte("b"), 42, nil); again != b {
		t.Errorf("b got id %d, then %d", b, again)
	}
}

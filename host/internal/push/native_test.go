package push

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// The native histogram of the tests, by Prometheus bucket index at schema
// 1 (bucket i is (2^((i-1)/2), 2^(i/2)]): positive buckets -2, -1 and 3
// (two spans, a gap of three between them), negative bucket 0, and a
// zero bucket; classic buckets served beside it, which the push leaves
// out as Prometheus does when it scrapes native histograms.
var (
	nativeSchema        = int32(1)
	nativeZeroThreshold = 0.001
	nativeZeroCount     = uint64(2)
	nativePositive      = map[int]uint64{-2: 3, -1: 5, 3: 4}
	nativeNegative      = map[int]uint64{0: 1}
	nativeCount         = uint64(2 + 3 + 5 + 4 + 1)
	nativeSum           = 7.5
)

// nativeFamilies is the host's merged families of a native histogram
// family native_seconds, one sample per device, through the wire encoder
// (the SDK's path: spans and counts as the Writer sends them) and the
// guard.
func nativeFamilies(t testing.TB, devices ...string) []*guard.Family {
	t.Helper()
	var rec wire.Recorder
	enc := wire.NewEncoder(0, false, rec.Send)
	h := &wire.Header{Name: "native_seconds", Type: pluginv1.MetricType_METRIC_TYPE_HISTOGRAM, Help: "h", Labels: []string{"device"}}
	g := &wire.Header{Name: "node_temp_celsius", Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Help: "h", Labels: []string{"device"}}
	bounds := []float64{1}
	for _, d := range devices {
		enc.AddNative(enc.Open(h, bounds, true), []string{d}, &wire.NativeSample{
			Sum: nativeSum, Count: nativeCount, Cumulative: []uint64{11},
			Schema: nativeSchema, ZeroThreshold: nativeZeroThreshold, ZeroCount: nativeZeroCount,
			PositiveSpans: 2, NegativeSpans: 1,
			SpanOffsets: []int32{-2, 3, 0}, SpanLengths: []uint32{2, 1, 1},
			PositiveBuckets: []uint64{3, 5, 4}, NegativeBuckets: []uint64{1},
		})
		enc.AddValue(enc.Open(g, nil, false), []string{d}, 40)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	res := guard.Merge([]guard.Input{{Plugin: "test", Batches: rec.Batches, MaxSeries: 1 << 30}}, guard.Options{MaxLabelValueLen: 4096})
	for _, f := range res.Families {
		if f.Name == "native_seconds" && (len(f.Parts) == 0 || !f.Parts[0].Chunk.IsNative()) {
			t.Fatalf("native_seconds is not native after the guard: %+v", res)
		}
	}
	return res.Families
}

// nativePusher pushes nativeFamilies: devices of snapshot k (from 1) are
// snaps[k-1], the last one from then on. Snapshot k is at base + k-1
// seconds (the clock is read before the source is asked).
func nativePusher(t *testing.T, url string, base time.Time, snaps [][]string, mod func(*config.Push)) *Pusher {
	t.Helper()
	var k atomic.Int32
	src := func(context.Context) []*guard.Family {
		return nativeFamilies(t, snaps[min(int(k.Add(1)), len(snaps))-1]...)
	}
	c := config.Push{URL: url, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Interval: time.Hour}
	c.HTTPClientConfig.FollowRedirects = true
	c.ExternalLabels = map[string]string{"job": "push-test", "instance": "node-1"}
	if mod != nil {
		mod(&c)
	}
	p, err := New(c, src, "plexporter-test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return base.Add(time.Duration(k.Load()) * time.Second) }
	return p
}

// TestNativeHistogramToRealPrometheus pushes native histograms with
// remote write 1.0 to Debian's Prometheus 2.42 (native histograms
// enabled), reads each back (count, sum and every bucket's bounds and
// count, computed here from the schema), checks that no classic series
// went with them, then a device disappears: its histogram must end at
// once (a stale histogram sample), not five minutes later.
func TestNativeHistogramToRealPrometheus(t *testing.T) {
	prom := startReceiver(t, "--enable-feature=native-histograms")
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	p := nativePusher(t, prom.writeURL, base, [][]string{{"a", "b"}, {"a"}}, nil)
	p.Snapshot(context.Background()) // a, b at base
	p.Snapshot(context.Background()) // a at base+1s; b stale
	stop := runPusher(p)             // a at base+2s
	defer stop()
	t1, t2 := base, base.Add(time.Second)
	waitFor(t, "the three snapshots sent", func() bool {
		return metric(t, p, "plexporter_push_pending_samples") == 0 && metric(t, p, "plexporter_push_samples_sent_total") >= 10
	})
	if n := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "rejected"); n != 0 {
		t.Fatalf("%v samples rejected by Prometheus", n)
	}
	ext := `instance="node-1",job="push-test"`
	for q, want := range map[string]float64{"histogram_count(native_seconds)": float64(nativeCount), "histogram_sum(native_seconds)": nativeSum} {
		got := prom.queryAt(q, t1)
		for _, d := range []string{"a", "b"} {
			k := labelKey(map[string]string{"device": d, "instance": "node-1", "job": "push-test"})
			if got[k] != want {
				t.Errorf("%s at the first push: %v, want %s = %v", q, got, k, want)
			}
		}
	}
	if got := prom.queryAt(`{__name__=~"native_seconds_.+"}`, t1); len(got) != 0 {
		t.Errorf("classic series pushed with the native histogram: %v", got)
	}
	// Every bucket, as Prometheus's API lists them: [rule, lower, upper, count].
	type bucket struct{ lo, hi, n float64 }
	var want []bucket
	base2 := math.Pow(2, math.Pow(2, -float64(nativeSchema)))
	for _, i := range slices.Sorted(mapsKeys(nativeNegative)) {
		want = append(want, bucket{-math.Pow(base2, float64(i)), -math.Pow(base2, float64(i-1)), float64(nativeNegative[i])})
	}
	want = append(want, bucket{-nativeZeroThreshold, nativeZeroThreshold, float64(nativeZeroCount)})
	for _, i := range slices.Sorted(mapsKeys(nativePositive)) {
		want = append(want, bucket{math.Pow(base2, float64(i-1)), math.Pow(base2, float64(i)), float64(nativePositive[i])})
	}
	raw := prom.rawQuery(fmt.Sprintf(`native_seconds{device="a",%s}`, ext), t1)
	var body struct {
		Data struct {
			Result []struct {
				Histogram [2]json.RawMessage `json:"histogram"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || len(body.Data.Result) != 1 {
		t.Fatalf("query native_seconds: %v %s", err, raw)
	}
	var h struct {
		Count, Sum string
		Buckets    [][4]json.RawMessage
	}
	if err := json.Unmarshal(body.Data.Result[0].Histogram[1], &h); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	var got []bucket
	for _, b := range h.Buckets {
		var lo, hi, n string
		json.Unmarshal(b[1], &lo)
		json.Unmarshal(b[2], &hi)
		json.Unmarshal(b[3], &n)
		got = append(got, bucket{atof(t, lo), atof(t, hi), atof(t, n)})
	}
	close := func(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(1, math.Abs(y)) }
	ok := len(got) == len(want) && h.Count == strconv.FormatUint(nativeCount, 10) && h.Sum == strconv.FormatFloat(nativeSum, 'f', -1, 64)
	for i := 0; ok && i < len(got); i++ {
		ok = close(got[i].lo, want[i].lo) && close(got[i].hi, want[i].hi) && got[i].n == want[i].n
	}
	if !ok {
		t.Errorf("histogram read back: count %s sum %s buckets %v\nwant count %d sum %v buckets %v", h.Count, h.Sum, got, nativeCount, nativeSum, want)
	}
	// b was stale at t2: gone at once. a is there.
	got2 := prom.queryAt("histogram_count(native_seconds)", t2.Add(500*time.Millisecond))
	if len(got2) != 1 || got2[labelKey(map[string]string{"device": "a", "instance": "node-1", "job": "push-test"})] != float64(nativeCount) {
		t.Errorf("after device b disappeared: %v, want a's histogram only (b ended by its staleness marker)", got2)
	}
}

func mapsKeys(m map[int]uint64) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rawQuery is the body of an instant query of q at at.
func (r *promReceiver) rawQuery(q string, at time.Time) []byte {
	r.t.Helper()
	u := fmt.Sprintf("%s/api/v1/query?query=%s&time=%s", r.queryBase, url.QueryEscape(q), strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	resp, err := http.Get(u)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// TestNativeHistogramStaleMarkerRW1 decodes the remote write 1.0 requests
// themselves: a native histogram is a histogram sample (no float sample,
// no classic series), and its staleness marker is the histogram
// Prometheus's remote write sends for one: sum value.StaleNaN, counts 0.
func TestNativeHistogramStaleMarkerRW1(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	p := nativePusher(t, srv.URL, base, [][]string{{"a", "b"}, {"a"}}, nil)
	p.Snapshot(context.Background())
	p.Snapshot(context.Background())
	stop := runPusher(p)
	waitFor(t, "both snapshots", func() bool {
		return metric(t, p, "plexporter_push_pending_samples") == 0 && metric(t, p, "plexporter_push_samples_sent_total") >= 10
	})
	stop()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var hists []string
	for _, ts := range rc.got {
		m := labelMap(ts.Labels)
		if m["__name__"] != "native_seconds" {
			if m["__name__"] != "node_temp_celsius" {
				t.Errorf("series %v pushed", m)
			}
			continue
		}
		if len(ts.Samples) != 0 || len(ts.Histograms) != 1 {
			t.Errorf("%v: %d samples, %d histograms; want one histogram", m, len(ts.Samples), len(ts.Histograms))
			continue
		}
		h := ts.Histograms[0]
		if value.IsStaleNaN(h.Sum) {
			if h.GetCountInt() != 0 || h.GetZeroCountInt() != 0 || len(h.PositiveSpans)+len(h.NegativeSpans) != 0 {
				t.Errorf("stale marker %+v: want counts 0, no buckets", h)
			}
			hists = append(hists, fmt.Sprintf("%s=stale@%d", m["device"], h.Timestamp-base.UnixMilli()))
			continue
		}
		want := prompb.Histogram{Count: &prompb.Histogram_CountInt{CountInt: nativeCount}, Sum: nativeSum, Schema: nativeSchema, ZeroThreshold: nativeZeroThreshold,
			ZeroCount:     &prompb.Histogram_ZeroCountInt{ZeroCountInt: nativeZeroCount},
			PositiveSpans: []prompb.BucketSpan{{Offset: -2, Length: 2}, {Offset: 3, Length: 1}}, PositiveDeltas: []int64{3, 2, -1},
			NegativeSpans: []prompb.BucketSpan{{Offset: 0, Length: 1}}, NegativeDeltas: []int64{1}, Timestamp: h.Timestamp}
		if !reflect.DeepEqual(want, h) {
			t.Errorf("histogram %+v\nwant      %+v", h, want)
		}
		hists = append(hists, fmt.Sprintf("%s@%d", m["device"], h.Timestamp-base.UnixMilli()))
	}
	if g := fmt.Sprint(hists); g != "[a@0 b@0 a@1000 b=stale@1000 a@2000]" {
		t.Errorf("histogram samples %s, want [a@0 b@0 a@1000 b=stale@1000 a@2000]", g)
	}
}

// TestNativeHistogramRemoteWrite2 pushes native histograms with remote
// write 2.0 to client_golang's handler: one histogram per series,
// metadata type HISTOGRAM, the written-histograms header counted as
// sent, and a histogram staleness marker.
func TestNativeHistogramRemoteWrite2(t *testing.T) {
	store := &rw2Store{}
	srv := httptest.NewServer(remote.NewWriteHandler(store, remote.MessageTypes{remote.WriteV2MessageType}))
	defer srv.Close()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	p := nativePusher(t, srv.URL+"/api/v1/write", base, [][]string{{"a", "b"}, {"a"}}, func(c *config.Push) { c.Protocol = config.PushRemoteWriteV2 })
	p.Snapshot(context.Background())
	p.Snapshot(context.Background())
	stop := runPusher(p)
	defer stop()
	waitFor(t, "both snapshots sent", func() bool {
		return metric(t, p, "plexporter_push_pending_samples") == 0 && metric(t, p, "plexporter_push_samples_sent_total") >= 10
	})
	if n := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "rejected"); n != 0 {
		t.Errorf("%v samples counted rejected (the written-histograms header not counted?)", n)
	}
	var hists []string
	for _, s := range store.got() {
		if s.labels["__name__"] != "native_seconds" {
			if s.hist != nil || s.labels["__name__"] != "node_temp_celsius" {
				t.Errorf("series %v pushed (histogram %v)", s.labels, s.hist)
			}
			continue
		}
		h := s.hist
		if h == nil {
			t.Errorf("%v: a float sample, want a histogram", s.labels)
			continue
		}
		if s.typ != writev2.Metadata_METRIC_TYPE_HISTOGRAM || s.help != "h" {
			t.Errorf("%v: metadata %v %q", s.labels, s.typ, s.help)
		}
		if value.IsStaleNaN(h.Sum) {
			hists = append(hists, fmt.Sprintf("%s=stale@%d", s.labels["device"], h.Timestamp-base.UnixMilli()))
			continue
		}
		ok := h.GetCountInt() == nativeCount && h.Sum == nativeSum && h.Schema == nativeSchema && h.ZeroThreshold == nativeZeroThreshold && h.GetZeroCountInt() == nativeZeroCount &&
			len(h.PositiveSpans) == 2 && h.PositiveSpans[0].Offset == -2 && h.PositiveSpans[0].Length == 2 && h.PositiveSpans[1].Offset == 3 && h.PositiveSpans[1].Length == 1 &&
			slices.Equal(h.PositiveDeltas, []int64{3, 2, -1}) && len(h.NegativeSpans) == 1 && h.NegativeSpans[0].Offset == 0 && h.NegativeSpans[0].Length == 1 &&
			slices.Equal(h.NegativeDeltas, []int64{1}) && h.GetCountFloat() == 0
		if !ok {
			t.Errorf("histogram %v", h)
		}
		hists = append(hists, fmt.Sprintf("%s@%d", s.labels["device"], h.Timestamp-base.UnixMilli()))
	}
	if g := fmt.Sprint(hists); g != "[a@0 b@0 a@1000 b=stale@1000 a@2000]" {
		t.Errorf("histogram samples %s, want [a@0 b@0 a@1000 b=stale@1000 a@2000]", g)
	}
}

// TestNativeHistogramOTLP pushes native histograms with OTLP: each is an
// ExponentialHistogram data point whose scale, offsets and dense bucket
// counts are computed here from the Prometheus buckets (OpenTelemetry's
// bucket j is (base^j, base^(j+1)], Prometheus's i is (base^(i-1),
// base^i]: j = i-1); cumulative, with the start time of its first push;
// the disappeared device's point flagged NoRecordedValue.
func TestNativeHistogramOTLP(t *testing.T) {
	o := &otlpReceiver{}
	srv := httptest.NewServer(o)
	defer srv.Close()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	p := nativePusher(t, srv.URL+"/v1/metrics", base, [][]string{{"a", "b"}, {"a"}}, func(c *config.Push) { c.Protocol = config.PushOTLP })
	p.Snapshot(context.Background())
	p.Snapshot(context.Background())
	stop := runPusher(p)
	defer stop()
	waitFor(t, "both snapshots sent", func() bool {
		return metric(t, p, "plexporter_push_pending_samples") == 0 && metric(t, p, "plexporter_push_samples_sent_total") >= 10
	})
	// Dense buckets from the Prometheus indexes: offset and counts.
	dense := func(m map[int]uint64) (int32, []uint64) {
		idx := slices.Sorted(mapsKeys(m))
		lo, hi := idx[0]-1, idx[len(idx)-1]-1
		counts := make([]uint64, hi-lo+1)
		for _, i := range idx {
			counts[i-1-lo] = m[i]
		}
		return int32(lo), counts
	}
	posOff, posCounts := dense(nativePositive)
	negOff, negCounts := dense(nativeNegative)
	var seen []string
	for _, req := range o.requests() {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != "native_seconds" {
						continue
					}
					e := m.GetExponentialHistogram()
					if e == nil || e.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE || m.Description != "h" {
						t.Errorf("native_seconds as %T (%v), want a cumulative ExponentialHistogram", m.Data, m)
						continue
					}
					for _, dp := range e.DataPoints {
						dev := ""
						for _, a := range dp.Attributes {
							if a.Key == "device" {
								dev = a.GetValue().GetStringValue()
							} else {
								t.Errorf("attribute %v", a)
							}
						}
						at := (int64(dp.TimeUnixNano) - base.UnixNano()) / 1e6
						if dp.StartTimeUnixNano != uint64(base.UnixNano()) {
							t.Errorf("%s@%d: start %d, want the first push's %d", dev, at, dp.StartTimeUnixNano, base.UnixNano())
						}
						if dp.Flags&noRecordedValue != 0 {
							seen = append(seen, fmt.Sprintf("%s=stale@%d", dev, at))
							continue
						}
						seen = append(seen, fmt.Sprintf("%s@%d", dev, at))
						ok := dp.Scale == nativeSchema && dp.ZeroThreshold == nativeZeroThreshold && dp.ZeroCount == nativeZeroCount &&
							dp.Count == nativeCount && dp.GetSum() == nativeSum && dp.Sum != nil &&
							dp.Positive.GetOffset() == posOff && slices.Equal(dp.Positive.GetBucketCounts(), posCounts) &&
							dp.Negative.GetOffset() == negOff && slices.Equal(dp.Negative.GetBucketCounts(), negCounts)
						if !ok {
							t.Errorf("%s@%d: %v\nwant scale %d zero %v/%d count %d sum %v positive %d %v negative %d %v", dev, at, dp,
								nativeSchema, nativeZeroThreshold, nativeZeroCount, nativeCount, nativeSum, posOff, posCounts, negOff, negCounts)
						}
					}
				}
			}
		}
	}
	if g := fmt.Sprint(seen); g != "[a@0 b@0 a@1000 b=stale@1000 a@2000]" {
		t.Errorf("data points %s, want [a@0 b@0 a@1000 b=stale@1000 a@2000]", g)
	}
}

// TestNativeHistogramSpooled: the spool keeps request bodies, so native
// histograms (and their staleness marker) of an earlier run's spooled
// snapshots arrive as histograms after a crash, in every protocol that
// spools (remote write 1.0 here; 2.0 and OTLP encode the same way).
func TestNativeHistogramSpooled(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	spooled := func(c *config.Push) { c.SpoolDir = dir }
	crashed := nativePusher(t, "http://127.0.0.1:1", base, [][]string{{"a", "b"}, {"a"}}, spooled)
	crashed.Snapshot(context.Background())
	crashed.Snapshot(context.Background())
	crashed.mu.Lock()
	for _, b := range crashed.ring {
		if !b.spooled || b.natives != nil {
			t.Errorf("snapshot at %d: spooled %v, natives kept %v", b.ts, b.spooled, b.natives != nil)
		}
	}
	crashed.mu.Unlock()

	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p := nativePusher(t, srv.URL, base.Add(time.Hour), [][]string{{"a"}}, spooled)
	p.now = func() time.Time { return base.Add(2 * time.Second) }
	stop := runPusher(p)
	waitFor(t, "the spooled snapshots and one more", func() bool { _, n := rc.count(); return n >= 10 })
	stop()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var hists []string
	for _, ts := range rc.got {
		m := labelMap(ts.Labels)
		if m["__name__"] != "native_seconds" {
			continue
		}
		if len(ts.Histograms) != 1 || len(ts.Samples) != 0 {
			t.Errorf("%v: %d samples, %d histograms", m, len(ts.Samples), len(ts.Histograms))
			continue
		}
		h := ts.Histograms[0]
		if value.IsStaleNaN(h.Sum) {
			hists = append(hists, fmt.Sprintf("%s=stale@%d", m["device"], h.Timestamp-base.UnixMilli()))
			continue
		}
		if h.GetCountInt() != nativeCount || h.Sum != nativeSum || !slices.Equal(h.PositiveDeltas, []int64{3, 2, -1}) {
			t.Errorf("histogram %+v", h)
		}
		hists = append(hists, fmt.Sprintf("%s@%d", m["device"], h.Timestamp-base.UnixMilli()))
	}
	if g := fmt.Sprint(hists); g != "[a@0 b@0 a@1000 b=stale@1000 a@2000]" {
		t.Errorf("histogram samples %s, want [a@0 b@0 a@1000 b=stale@1000 a@2000]", g)
	}
}

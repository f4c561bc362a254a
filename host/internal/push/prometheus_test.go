package push

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// promReceiver is Debian's prometheus run as a remote write receiver on a
// temporary data directory, which outlives a stop and start.
type promReceiver struct {
	t         *testing.T
	argv      []string // the command, run by start
	ready     string   // a path that answers 200 once it takes writes
	bin, dir  string
	addr      string
	cmd       *exec.Cmd
	logs      *syncbuf.Buffer
	writeURL  string
	queryBase string
}

func startReceiver(t *testing.T, flags ...string) *promReceiver {
	t.Helper()
	bin := sdktest.PrometheusBinary(t, "prometheus")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte("global: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := &promReceiver{t: t, bin: bin, dir: dir, addr: addr, logs: &syncbuf.Buffer{}, writeURL: "http://" + addr + "/api/v1/write", queryBase: "http://" + addr, ready: "/-/ready"}
	r.argv = []string{bin, "--config.file=" + filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--web.enable-remote-write-receiver"}
	r.argv = append(r.argv, flags...)
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", r.logs.String())
		}
	})
	r.start()
	return r
}

func (r *promReceiver) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.argv[0], r.argv[1:]...)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, "prometheus ready", func() bool {
		resp, err := http.Get(r.queryBase + r.ready)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (r *promReceiver) stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	r.cmd = nil
}

// queryAt evaluates q at the instant at and returns the result's values
// by their whole label set.
func (r *promReceiver) queryAt(q string, at time.Time) map[string]float64 {
	r.t.Helper()
	u := fmt.Sprintf("%s/api/v1/query?query=%s&time=%s", r.queryBase, url.QueryEscape(q), strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	resp, err := http.Get(u)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Status != "success" {
		r.t.Fatalf("query %s: %v %s", q, err, b)
	}
	out := map[string]float64{}
	for _, res := range body.Data.Result {
		v, err := strconv.ParseFloat(fmt.Sprint(res.Value[1]), 64)
		if err != nil {
			r.t.Fatal(err)
		}
		out[labelKey(res.Metric)] = v
	}
	return out
}

func labelKey(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// every kind of family the host serves.
func mixed(devices ...string) []*dto.MetricFamily {
	mfs := gauges("node_temp_celsius", devices...)
	c := &dto.MetricFamily{Name: proto.String("port_rcv_bytes_total"), Help: proto.String("h"), Type: dto.MetricType_COUNTER.Enum()}
	h := &dto.MetricFamily{Name: proto.String("io_latency_seconds"), Help: proto.String("h"), Type: dto.MetricType_HISTOGRAM.Enum()}
	s := &dto.MetricFamily{Name: proto.String("rpc_seconds"), Help: proto.String("h"), Type: dto.MetricType_SUMMARY.Enum()}
	for i, d := range devices {
		lbl := []*dto.LabelPair{{Name: proto.String("device"), Value: proto.String(d)}}
		c.Metric = append(c.Metric, &dto.Metric{Label: lbl, Counter: &dto.Counter{Value: proto.Float64(1e12 + float64(i))}})
		h.Metric = append(h.Metric, &dto.Metric{Label: lbl, Histogram: &dto.Histogram{SampleCount: proto.Uint64(7), SampleSum: proto.Float64(0.25), Bucket: []*dto.Bucket{
			{UpperBound: proto.Float64(0.001), CumulativeCount: proto.Uint64(2)}, {UpperBound: proto.Float64(0.1), CumulativeCount: proto.Uint64(6)}}}})
		s.Metric = append(s.Metric, &dto.Metric{Label: lbl, Summary: &dto.Summary{SampleCount: proto.Uint64(3), SampleSum: proto.Float64(1.5), Quantile: []*dto.Quantile{{Quantile: proto.Float64(0.5), Value: proto.Float64(0.4)}}}})
	}
	return append(mfs, c, h, s)
}

// TestRealPrometheusReceivesTheSnapshot pushes every kind of family to a
// real Prometheus and reads each series back at the push's timestamp;
// then a device disappears, and its series must end at once (staleness
// marker), not linger for the five-minute lookback.
func TestRealPrometheusReceivesTheSnapshot(t *testing.T) {
	receivesTheSnapshot(t, startReceiver(t))
}

// TestRealVictoriaMetricsReceivesTheSnapshot is the same against Debian's
// VictoriaMetrics (its Prometheus-compatible /api/v1/write and query API).
func TestRealVictoriaMetricsReceivesTheSnapshot(t *testing.T) {
	receivesTheSnapshot(t, startVictoriaMetrics(t))
}

// startVictoriaMetrics runs Debian's victoria-metrics on a temporary data
// directory; without it the test is skipped, unless
// PLEXPORTER_REQUIRE_PROMTOOL is set (CI installs it).
func startVictoriaMetrics(t *testing.T) *promReceiver {
	t.Helper()
	bin, err := exec.LookPath("victoria-metrics")
	if err != nil {
		if os.Getenv("PLEXPORTER_REQUIRE_PROMTOOL") != "" {
			t.Fatal("victoria-metrics not found but PLEXPORTER_REQUIRE_PROMTOOL is set (Debian package victoria-metrics)")
		}
		t.Skip("victoria-metrics not installed (Debian package victoria-metrics)")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := &promReceiver{t: t, bin: bin, dir: dir, addr: addr, logs: &syncbuf.Buffer{}, writeURL: "http://" + addr + "/api/v1/write", queryBase: "http://" + addr, ready: "/health"}
	// Queries see every sample at once (no latency offset, no cache).
	r.argv = []string{bin, "-storageDataPath=" + filepath.Join(dir, "data"), "-httpListenAddr=" + addr, "-search.latencyOffset=0s", "-search.disableCache"}
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("victoria-metrics log:\n%s", r.logs.String())
		}
	})
	r.start()
	return r
}

func receivesTheSnapshot(t *testing.T, prom *promReceiver) {
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	var snap atomic.Int32
	p := newPusher(t, prom.writeURL, func(context.Context) []*dto.MetricFamily {
		if snap.Add(1) == 1 {
			return mixed("mlx5_0", "mlx5_1")
		}
		return mixed("mlx5_0")
	}, func(c *config.Push) { c.ExternalLabels = map[string]string{"job": "push-test", "instance": "node-1"} })
	p.now = func() time.Time { return base.Add(time.Duration(snap.Load()) * time.Second) }
	p.Snapshot(context.Background())
	p.Snapshot(context.Background())
	stop := runPusher(p)
	defer stop()
	waitFor(t, "every sample sent", func() bool { return metric(t, p, "plexporter_push_pending_samples") == 0 })

	want := flattened(t, mixed("mlx5_0", "mlx5_1"), p.external)
	if len(want) != 2*(1+1+5+3) {
		t.Fatalf("flattened %d series", len(want))
	}
	var got map[string]float64
	// A receiver may take a moment to make what it took searchable.
	waitFor(t, "the pushed series searchable", func() bool {
		got = prom.queryAt(`{job="push-test"}`, base)
		return len(got) >= len(want)
	})
	for _, s := range want {
		m := map[string]string{}
		for _, l := range s.labels {
			m[l.Name] = l.Value
		}
		k := labelKey(m)
		if v, ok := got[k]; !ok || v != s.value {
			t.Errorf("%s: the receiver has %v (present %v), want %v", k, v, ok, s.value)
		}
		delete(got, k)
	}
	if len(got) > 0 {
		t.Errorf("the receiver has series nobody sent: %v", got)
	}
	var after map[string]float64
	waitFor(t, "the second snapshot searchable", func() bool {
		after = prom.queryAt(`{job="push-test"}`, base.Add(1500*time.Millisecond))
		return len(after) <= len(want)/2
	})
	if len(after) != len(want)/2 {
		t.Errorf("after mlx5_1 went, the receiver answers %d series, want %d: %v", len(after), len(want)/2, after)
	}
	for k := range after {
		if strings.Contains(k, "mlx5_1") {
			t.Errorf("%s still answers after its staleness marker", k)
		}
	}
}

// TestOutageLosesNothing stops the receiver while snapshots go on, starts
// it again, and finds every sample of the outage in it. Prometheus (no
// out-of-order window) would refuse a sample older than one it has, so
// all of them arriving means they arrived in order.
func TestOutageLosesNothing(t *testing.T) {
	prom := startReceiver(t)
	base := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	var k atomic.Int32
	p := newPusher(t, prom.writeURL, func(context.Context) []*dto.MetricFamily {
		mfs := gauges("outage_sample", "a", "b")
		v := float64(k.Add(1) - 1)
		for _, m := range mfs[0].Metric {
			m.Gauge.Value = proto.Float64(v)
		}
		return mfs
	}, func(c *config.Push) {
		c.MaxBackoff = 200 * time.Millisecond
		c.ExternalLabels = map[string]string{"job": "outage"}
	})
	p.now = func() time.Time { return base.Add(time.Duration(k.Load()) * time.Second) }
	stop := runPusher(p) // snapshot 0; the rest come from the test
	defer stop()
	// Only Run takes snapshots in the host, one at a time; the test's must
	// not overlap Run's first (both would read the clock before either
	// counted, and the receiver refused the later as out of order).
	waitFor(t, "snapshot 0 taken", func() bool {
		return k.Load() == 1 && metric(t, p, "plexporter_push_pending_samples")+metric(t, p, "plexporter_push_samples_sent_total") == 2
	})
	p.Snapshot(context.Background())
	waitFor(t, "the first two snapshots sent", func() bool { return metric(t, p, "plexporter_push_samples_sent_total") == 4 })

	prom.stop()
	const outage = 30
	for range outage {
		p.Snapshot(context.Background())
	}
	waitFor(t, "the sender to meet the outage", func() bool { return metric(t, p, "plexporter_push_samples_failed_total") > 0 })
	if got := metric(t, p, "plexporter_push_pending_samples"); got != 2*outage {
		t.Fatalf("pending %v during the outage, want %d", got, 2*outage)
	}
	if lag := metric(t, p, "plexporter_push_oldest_unsent_timestamp_seconds"); lag != float64(base.Add(2*time.Second).Unix()) {
		t.Errorf("oldest unsent %v, want %d (snapshot 2)", lag, base.Add(2*time.Second).Unix())
	}
	prom.start()
	waitFor(t, "the outage's samples sent", func() bool { return metric(t, p, "plexporter_push_pending_samples") == 0 })

	last := base.Add((outage + 1) * time.Second)
	if n := prom.queryAt(`count_over_time(outage_sample{device="a"}[10m])`, last); n[labelKey(map[string]string{"device": "a", "job": "outage"})] != outage+2 {
		t.Errorf("Prometheus holds %v samples of device a, want %d", n, outage+2)
	}
	for i := range outage + 2 {
		got := prom.queryAt(`outage_sample`, base.Add(time.Duration(i)*time.Second))
		for _, d := range []string{"a", "b"} {
			if v := got[labelKey(map[string]string{"__name__": "outage_sample", "device": d, "job": "outage"})]; v != float64(i) {
				t.Errorf("at snapshot %d device %s: %v, want %d", i, d, v, i)
			}
		}
	}
	for _, r := range []string{DropRejected, DropRingFull, DropError} {
		if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", r); got != 0 {
			t.Errorf("dropped{%s} %v", r, got)
		}
	}
}

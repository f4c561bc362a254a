package push

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/host/internal/config"
)

// values returns the values of series g the receiver got, in order.
func (rc *receiver) values() []float64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []float64
	for _, ts := range rc.got {
		for _, s := range ts.Samples {
			out = append(out, s.Value)
		}
	}
	return out
}

// TestOneTargetDownNeverDelaysAnother: two targets of one interval, one
// answering 503 forever. The other receives every snapshot, in order,
// while the first retries its oldest; both take each snapshot from one
// call of the source (the value is the call's number), not one each.
func TestOneTargetDownNeverDelaysAnother(t *testing.T) {
	var down atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	good := &receiver{}
	srv := httptest.NewServer(good)
	defer srv.Close()
	var calls atomic.Int64
	src := func(context.Context) []*dto.MetricFamily {
		g := gauges("g", "a")
		g[0].Metric[0].Gauge.Value = new(float64(calls.Add(1)))
		return g
	}
	mod := func(name string) func(*config.Push) {
		return func(c *config.Push) {
			c.Name, c.Interval, c.FlushTimeout = name, 20*time.Millisecond, 100*time.Millisecond
		}
	}
	pBad := newPusher(t, bad.URL+"/api/v1/write", src, mod("bad"))
	pGood := newPusher(t, srv.URL+"/api/v1/write", src, mod("good"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { RunAll(ctx, pBad, pGood); close(done) }()
	waitFor(t, "20 snapshots at the good target while the other is down", func() bool {
		return len(good.values()) >= 20 && down.Load() >= 20
	})
	cancel()
	<-done

	n := calls.Load()
	got := good.values()
	if int64(len(got)) != n {
		t.Errorf("the good target got %d samples, the source was asked %d times (want one call per tick for both targets, each snapshot sent)", len(got), n)
	}
	for i, v := range got {
		if v != float64(i+1) {
			t.Fatalf("sample %d of the good target is snapshot %v, want %d: every snapshot in order (got %v)", i, v, i+1, got)
		}
	}
	if sent := metric(t, pGood, "plexporter_push_samples_sent_total"); sent != float64(n) {
		t.Errorf("good: sent %v, want %d", sent, n)
	}
	if s := metric(t, pBad, "plexporter_push_samples_sent_total"); s != 0 || metric(t, pBad, "plexporter_push_samples_failed_total") < 20 {
		t.Errorf("bad: sent %v, failed %v", s, metric(t, pBad, "plexporter_push_samples_failed_total"))
	}
	// Nothing sent at shutdown: every snapshot dropped, counted, by the
	// target that could not send it only.
	if d := metric(t, pBad, "plexporter_push_samples_dropped_total", "reason", "shutdown"); d != float64(n) {
		t.Errorf("bad: dropped at shutdown %v, want %d", d, n)
	}
	if d := metric(t, pGood, "plexporter_push_samples_dropped_total", "reason", "shutdown"); d != 0 {
		t.Errorf("good: dropped at shutdown %v", d)
	}
}

// TestShutdownFlushesEveryTargetAtOnce: at shutdown target "slow" still
// has samples to send (flush timeout 30 s) and its receiver answers 503
// until target "down" (503 forever, flush timeout 100 ms) has given up,
// dropping its samples at the end of its own flush. Flushed at once, down
// gives up first and slow then sends everything; flushed one after the
// other (slow first), slow would spend its whole flush timeout waiting
// for down's, and drop its samples.
func TestShutdownFlushesEveryTargetAtOnce(t *testing.T) {
	src := func(context.Context) []*dto.MetricFamily { return gauges("g", "a", "b") }
	downSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer downSrv.Close()
	var down *Pusher
	gaveUp := func() bool {
		down.mu.Lock()
		defer down.mu.Unlock()
		return down.dropped[DropShutdown] > 0
	}
	got := &receiver{}
	slowSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !gaveUp() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		got.ServeHTTP(w, r)
	}))
	defer slowSrv.Close()
	slow := newPusher(t, slowSrv.URL+"/api/v1/write", src, func(c *config.Push) {
		c.Name, c.FlushTimeout, c.MaxBackoff = "slow", 30*time.Second, 20*time.Millisecond
	})
	down = newPusher(t, downSrv.URL+"/api/v1/write", src, func(c *config.Push) {
		c.Name, c.FlushTimeout, c.MaxBackoff = "down", 100*time.Millisecond, 20*time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { RunAll(ctx, slow, down); close(done) }()
	waitFor(t, "both targets failing", func() bool {
		return metric(t, slow, "plexporter_push_samples_failed_total") > 0 && metric(t, down, "plexporter_push_samples_failed_total") > 0
	})
	cancel()
	<-done
	if d := metric(t, slow, "plexporter_push_samples_dropped_total", "reason", "shutdown"); d != 0 {
		t.Errorf("slow: %v samples dropped at shutdown: the flushes ran one after the other", d)
	}
	if _, series := got.count(); series != 2 {
		t.Errorf("slow's receiver got %d series, want 2", series)
	}
	if d := metric(t, down, "plexporter_push_samples_dropped_total", "reason", "shutdown"); d != 2 {
		t.Errorf("down: %v samples dropped at shutdown, want 2", d)
	}
}

// TestSelfMetricsCarryTheTarget: every plexporter_push_* series carries
// remote_name and url (without credentials); two pushers register side
// by side.
func TestSelfMetricsCarryTheTarget(t *testing.T) {
	src := func(context.Context) []*dto.MetricFamily { return gauges("g", "a") }
	a := newPusher(t, "https://user:secret@mimir.example/api/v1/push", src, func(c *config.Push) { c.Name = "mimir"; c.SpoolDir = t.TempDir() })
	b := newPusher(t, "http://collector:4318/v1/metrics", src, func(c *config.Push) { c.Protocol = config.PushOTLP })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a, b)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{"mimir": "https://mimir.example/api/v1/push", config.DefaultPushName("http://collector:4318/v1/metrics"): "http://collector:4318/v1/metrics"}
	seen := map[string]int{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "plexporter_push_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if want, ok := targets[l["remote_name"]]; !ok || l["url"] != want {
				t.Errorf("%s%v: want remote_name and url of a target, credentials stripped", mf.GetName(), l)
			}
			seen[l["remote_name"]]++
		}
	}
	if len(seen) != 2 || seen["mimir"] <= seen[b.Name()] {
		t.Errorf("series by target %v (mimir has a spool: more series)", seen)
	}
	if a.URL() != "https://mimir.example/api/v1/push" || b.Name() != config.DefaultPushName("http://collector:4318/v1/metrics") {
		t.Errorf("names %q %q, url %q", a.Name(), b.Name(), a.URL())
	}
}

// BenchmarkTwoTargetsPipeline is BenchmarkPushPipeline's work for two
// remote write 1.0 targets of one interval: "shared", as RunAll does it
// (one source call, both pushers take its families), against "apart" (a
// source call per target, as two independent Runs without a shared round
// would do). cpu-ms/op is the process's CPU (rusage, user and system) a
// push of both, steadier than ns/op on a shared machine; -count runs the
// two alternately.
//
//	GOMAXPROCS=1 go test ./host/internal/push -run '^$' -bench TwoTargetsPipeline -count 6
func BenchmarkTwoTargetsPipeline(b *testing.B) {
	for _, mode := range []string{"shared", "apart"} {
		b.Run(mode, func(b *testing.B) {
			src := pipelineSource(b)
			var ps []*Pusher
			for i := range 2 {
				p, err := New(config.Push{Name: fmt.Sprint(i), URL: fmt.Sprintf("http://127.0.0.1:1/%d", i)}, src, "bench", slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				ps = append(ps, p)
			}
			rawp, zp := new([]byte), new([]byte)
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				if mode == "shared" {
					ts, mfs := time.Now(), src(context.Background())
					for _, p := range ps {
						p.take(ts, mfs)
					}
				} else {
					for _, p := range ps {
						p.Snapshot(context.Background())
					}
				}
				for _, p := range ps {
					for len(p.ring) > 0 {
						n := min(p.cfg.MaxSamplesPerSend, p.ring[0].unsent())
						if _, err := rw1Body(p.request(p.ring[0], n), rawp, zp); err != nil {
							b.Fatal(err)
						}
						p.advance(p.ring[0], n)
					}
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package push

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/prometheus/client_golang/exp/api/remote"
	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/guard"
)

// spoolSource is a source of three series, a gauge g{device=a,b} and a
// counter c_total{device=a}, whose values are the snapshot's number k
// (the counter's 10k), counted in k.
func spoolSource(k *atomic.Int32) func(context.Context) []*dto.MetricFamily {
	return func(context.Context) []*dto.MetricFamily {
		v := float64(k.Add(1) - 1)
		mfs := gauges("g", "a", "b")
		for _, m := range mfs[0].Metric {
			m.Gauge.Value = proto.Float64(v)
		}
		c := &dto.MetricFamily{Name: proto.String("c_total"), Help: proto.String("h"), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{{Name: proto.String("device"), Value: proto.String("a")}}, Counter: &dto.Counter{Value: proto.Float64(10 * v)}}}}
		return append(mfs, c)
	}
}

const spoolSeries = 3 // samples a snapshot of spoolSource

// arrival is one sample a receiver got: timestamp (ms), value, and for
// an OTLP counter its start time (ms).
type arrival struct {
	ts    int64
	value float64
	start int64
}

// protoReceiver is a receiver of one protocol built from its project's
// packages: client_golang's remote write handler taking 2.0 only, or the
// OTLP protos' receiver. It reports every sample, by series, in arrival
// order, and every request's Content-Type.
type protoReceiver struct {
	path     string
	handler  http.Handler
	arrivals func(t *testing.T) map[string][]arrival
	types    func() []string
}

func newProtoReceiver(protocol string) *protoReceiver {
	switch protocol {
	case config.PushRemoteWriteV2:
		store := &rw2Store{}
		return &protoReceiver{
			path:    "/api/v1/write",
			handler: remote.NewWriteHandler(store, remote.MessageTypes{remote.WriteV2MessageType}),
			arrivals: func(*testing.T) map[string][]arrival {
				out := map[string][]arrival{}
				for _, s := range store.got() {
					k := labelKey(s.labels)
					out[k] = append(out[k], arrival{ts: s.ts, value: s.value})
				}
				return out
			},
			types: func() []string {
				store.mu.Lock()
				defer store.mu.Unlock()
				var ct []string
				for _, h := range store.headers {
					ct = append(ct, h.Get("Content-Type"))
				}
				return ct
			},
		}
	case config.PushOTLP:
		rc := &otlpReceiver{}
		return &protoReceiver{
			path:    "/v1/metrics",
			handler: rc,
			arrivals: func(t *testing.T) map[string][]arrival {
				out := map[string][]arrival{}
				// One request is part of one snapshot: a series once.
				for _, got := range fromOTLP(t, rc.requests()) {
					for k, s := range got {
						out[k] = append(out[k], arrival{ts: int64(s.ts / 1e6), value: s.value, start: int64(s.start / 1e6)})
					}
				}
				return out
			},
			types: func() []string {
				rc.mu.Lock()
				defer rc.mu.Unlock()
				var ct []string
				for _, h := range rc.headers {
					ct = append(ct, h.Get("Content-Type"))
				}
				return ct
			},
		}
	}
	panic(protocol)
}

// downAddress is a loopback address nothing listens on (yet).
func downAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveAt starts h on addr.
func serveAt(t *testing.T, addr string, h http.Handler) {
	t.Helper()
	var ln net.Listener
	waitFor(t, "listening on "+addr, func() bool {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
}

// checkInOrder: every series got exactly the values 0..snaps-1 (the
// counter 10 times them), at increasing timestamps, each once; the
// series are those of spoolSource. It returns the arrivals.
func checkInOrder(t *testing.T, got map[string][]arrival, first, snaps int) {
	t.Helper()
	if len(got) != spoolSeries {
		t.Errorf("%d series arrived, want %d: %v", len(got), spoolSeries, got)
	}
	for key, as := range got {
		scale := 1.0
		if strings.Contains(key, "c_total") {
			scale = 10
		}
		var vals []float64
		for i, a := range as {
			vals = append(vals, a.value/scale)
			if i > 0 && a.ts <= as[i-1].ts {
				t.Errorf("%s: sample %d at %d after %d: out of order or twice", key, i, a.ts, as[i-1].ts)
			}
		}
		ok := len(vals) == snaps-first
		for i := 0; ok && i < len(vals); i++ {
			ok = vals[i] == float64(first+i)
		}
		if !ok {
			t.Errorf("%s: values %v, want %d..%d once each, in order", key, vals, first, snaps-1)
		}
	}
}

// TestSpoolOutageAcrossARestart, for remote write 2.0 and OTLP: the
// receiver is down; snapshots queue into the spool; the pusher is
// stopped and a new one started on the same directory (a restart); the
// receiver comes up: every sample of the outage arrives, in order, once,
// and the OTLP counter points keep the start time of the first run's
// first push: in the spooled bodies, and after the (clean) restart.
func TestSpoolOutageAcrossARestart(t *testing.T) {
	for _, protocol := range []string{config.PushRemoteWriteV2, config.PushOTLP} {
		t.Run(protocol, func(t *testing.T) {
			rc := newProtoReceiver(protocol)
			addr := downAddress(t)
			url := "http://" + addr + rc.path
			dir := filepath.Join(t.TempDir(), "spool")
			base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
			var k atomic.Int32
			mod := func(c *config.Push) {
				c.Protocol, c.SpoolDir = protocol, dir
				c.MaxSamplesPerSend = 2 // more than one request a snapshot
				c.FlushTimeout = 50 * time.Millisecond
				c.MaxPendingSamples = spoolSeries // in memory: only one snapshot; the spool holds the rest
			}
			clock := func() time.Time { return base.Add(time.Duration(k.Load()) * time.Second) }

			p1 := newPusher(t, url, spoolSource(&k), mod)
			p1.now = clock
			stop1 := runPusher(p1) // snapshot 0
			// Snapshot calls must not overlap: Run's first is done once
			// its file is counted (the pusher's lock is let go of while a
			// file is written; pending counts the snapshot before).
			waitFor(t, "snapshot 0 taken and spooled", func() bool {
				return k.Load() == 1 && metric(t, p1, "plexporter_push_spool_bytes") > 0
			})
			const outage = 20
			for range outage - 1 {
				p1.Snapshot(context.Background())
			}
			waitFor(t, "the sender to meet the outage", func() bool { return metric(t, p1, "plexporter_push_samples_failed_total") > 0 })
			stop1()
			for _, r := range []string{DropShutdown, DropRingFull, DropSpoolFull, DropTooOld, DropError} {
				if got := metric(t, p1, "plexporter_push_samples_dropped_total", "reason", r); got != 0 {
					t.Errorf("first run: dropped{%s} %v", r, got)
				}
			}
			if n := len(spoolFiles(t, dir)); n != outage {
				t.Fatalf("%d spool files after the first run, want %d", n, outage)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*"+spoolExts[protocol])); len(m) != outage {
				t.Errorf("spool files %v: want the protocol's ending %s", m, spoolExts[protocol])
			}

			serveAt(t, addr, rc.handler)
			p2 := newPusher(t, url, spoolSource(&k), mod)
			p2.now = clock
			if got := metric(t, p2, "plexporter_push_pending_samples"); got != outage*spoolSeries {
				t.Errorf("pending %v at the restart, want the spool's %d", got, outage*spoolSeries)
			}
			stop2 := runPusher(p2) // snapshot outage
			waitFor(t, "every sample sent", func() bool {
				return metric(t, p2, "plexporter_push_samples_sent_total") == (outage+1)*spoolSeries
			})
			stop2()
			got := rc.arrivals(t)
			checkInOrder(t, got, 0, outage+1)
			if n := len(spoolFiles(t, dir)); n != 0 {
				t.Errorf("%d spool files left", n)
			}
			if protocol == config.PushOTLP {
				// The first run's first push, in the spooled bodies and,
				// the restart being clean, in the second run's own.
				for _, a := range got[labelKey(map[string]string{"__name__": "c_total", "device": "a"})] {
					if a.start != base.UnixMilli() {
						t.Errorf("counter point at %d starts at %d, want %d", a.ts, a.start, base.UnixMilli())
					}
				}
			}
		})
	}
}

// TestSpoolOfAnotherProtocol: push.protocol changed between runs; the
// earlier run's files cannot be posted in the new protocol. They are
// dropped at start, counted (other_protocol), in one log line naming the
// directory, the count and the protocol; nothing goes to the receiver
// with another protocol's content type.
func TestSpoolOfAnotherProtocol(t *testing.T) {
	for _, c := range []struct{ before, after string }{
		{config.PushRemoteWriteV1, config.PushRemoteWriteV2},
		{config.PushRemoteWriteV2, config.PushOTLP},
		{config.PushOTLP, config.PushRemoteWriteV2},
	} {
		t.Run(c.before+"_to_"+c.after, func(t *testing.T) {
			dir := t.TempDir()
			var k atomic.Int32
			old := newPusher(t, "http://127.0.0.1:1/", spoolSource(&k), func(p *config.Push) { p.Protocol, p.SpoolDir = c.before, dir })
			for range 3 {
				old.Snapshot(context.Background())
			}
			if n := len(spoolFiles(t, dir)); n != 3 {
				t.Fatalf("%d files, want 3", n)
			}

			rc := newProtoReceiver(c.after)
			srv := httptest.NewServer(rc.handler)
			defer srv.Close()
			var logs syncBuffer
			cfg := config.Push{URL: srv.URL + rc.path, Protocol: c.after, SpoolDir: dir, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Interval: time.Hour}
			src := spoolSource(&k)
			p, err := New(cfg, func(ctx context.Context) []*guard.Family { return merged(t, src(ctx)) }, "t", slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", DropOtherProtocol); got != 3*spoolSeries {
				t.Errorf("dropped{other_protocol} %v, want %d", got, 3*spoolSeries)
			}
			if n := len(spoolFiles(t, dir)); n != 0 {
				t.Errorf("%d files of the other protocol left", n)
			}
			var lines []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "another protocol") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "dir="+dir) || !strings.Contains(lines[0], "files=3") || !strings.Contains(lines[0], "protocol="+c.before) {
				t.Errorf("log lines %q: want one naming the directory, 3 files and %s", lines, c.before)
			}
			stop := runPusher(p)
			waitFor(t, "the new run's snapshot sent", func() bool { return metric(t, p, "plexporter_push_samples_sent_total") == spoolSeries })
			stop()
			checkInOrder(t, rc.arrivals(t), 3, 4)
			want := map[string]string{config.PushRemoteWriteV2: "application/x-protobuf;proto=io.prometheus.write.v2.Request", config.PushOTLP: "application/x-protobuf"}[c.after]
			for _, ct := range rc.types() {
				if ct != want {
					t.Errorf("a request with Content-Type %q, want %q only", ct, want)
				}
			}
		})
	}
}

// syncBuffer is a bytes.Buffer for a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSpoolByteCapDropsOldest, for remote write 2.0 and OTLP: a spool
// over spool_max_bytes drops its oldest snapshots, counted (spool_full);
// the rest arrive in order once the receiver is up.
func TestSpoolByteCapDropsOldest(t *testing.T) {
	for _, protocol := range []string{config.PushRemoteWriteV2, config.PushOTLP} {
		t.Run(protocol, func(t *testing.T) {
			rc := newProtoReceiver(protocol)
			addr := downAddress(t)
			dir := t.TempDir()
			var k atomic.Int32
			mod := func(c *config.Push) { c.Protocol, c.SpoolDir = protocol, dir }
			p := newPusher(t, "http://"+addr+rc.path, spoolSource(&k), mod)
			base := time.Now().Add(-time.Minute)
			p.now = func() time.Time { return base.Add(time.Duration(k.Load()) * time.Second) }
			k.Store(1) // values from 1: no zero left out of the first request, the files' sizes alike
			p.Snapshot(context.Background())
			one := p.spool.bytes
			p.spool.maxBytes = 2*one + one/2 // two files fit, not three
			for range 4 {
				p.Snapshot(context.Background())
			}
			if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", DropSpoolFull); got != 3*spoolSeries {
				t.Errorf("dropped{spool_full} %v, want %d (the three oldest snapshots; files of %d bytes, cap %d)", got, 3*spoolSeries, one, p.spool.maxBytes)
			}
			if n := len(spoolFiles(t, dir)); n != 2 {
				t.Errorf("%d files, want 2", n)
			}
			if b := metric(t, p, "plexporter_push_spool_bytes"); b > float64(p.spool.maxBytes) {
				t.Errorf("spool bytes %v over the cap %d", b, p.spool.maxBytes)
			}
			serveAt(t, addr, rc.handler)
			p.spool.maxBytes = 1 << 30 // Run's snapshot must not drop another
			stop := runPusher(p)       // snapshot 5
			waitFor(t, "the rest sent", func() bool { return metric(t, p, "plexporter_push_samples_sent_total") == 3*spoolSeries })
			stop()
			checkInOrder(t, rc.arrivals(t), 4, 7)
		})
	}
}

// TestSpoolFullDiskDropsOldest: the spool on a file system that fills
// up (a 64 KiB tmpfs, mounted by the test: root only) drops its oldest
// snapshots to make room, counted (spool_full), never an error that
// leaves snapshots in memory, never a crash; the newest arrive in order.
func TestSpoolFullDiskDropsOldest(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	rc := newProtoReceiver(config.PushOTLP)
	addr := downAddress(t)
	var k atomic.Int32
	p := newPusher(t, "http://"+addr+rc.path, spoolSource(&k), func(c *config.Push) { c.Protocol, c.SpoolDir = config.PushOTLP, dir })
	base := time.Now().Add(-time.Minute)
	p.now = func() time.Time { return base.Add(time.Duration(k.Load()) * time.Second) }
	const snaps = 40 // a page each at least: over 64 KiB
	for range snaps {
		p.Snapshot(context.Background())
	}
	dropped := metric(t, p, "plexporter_push_samples_dropped_total", "reason", DropSpoolFull)
	files := len(spoolFiles(t, dir))
	t.Logf("a 64 KiB file system holds %d snapshots; %v samples dropped", files, dropped)
	if dropped == 0 || dropped != float64((snaps-files)*spoolSeries) {
		t.Errorf("dropped{spool_full} %v, want %d (all but the %d files on disk)", dropped, (snaps-files)*spoolSeries, files)
	}
	if e := metric(t, p, "plexporter_push_spool_errors_total"); e != 0 {
		t.Errorf("spool errors %v: a full disk makes room by dropping the oldest", e)
	}
	if pend := metric(t, p, "plexporter_push_pending_samples"); pend != float64(files*spoolSeries) {
		t.Errorf("pending %v, want the %d files' %d", pend, files, files*spoolSeries)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	serveAt(t, addr, rc.handler)
	// The sender alone (Run would take one more snapshot, making room
	// on the full disk again): it sends what the spool holds and ends.
	stopping := make(chan struct{})
	close(stopping)
	p.sendLoop(context.Background(), stopping)
	if sent := metric(t, p, "plexporter_push_samples_sent_total"); sent != float64(files*spoolSeries) {
		t.Errorf("sent %v, want %d", sent, files*spoolSeries)
	}
	checkInOrder(t, rc.arrivals(t), snaps-files, snaps)
	if n := len(spoolFiles(t, dir)); n != 0 {
		t.Errorf("%d files left", n)
	}
}

// TestOTLPStartTimesAcrossRestarts: with a spool, a clean shutdown keeps
// the OTLP counters' start times for the next run, which keeps them
// while a counter does not decrease; a decrease moves it, as within a
// run; after a crash (nothing kept) the next run starts its counters
// anew.
func TestOTLPStartTimesAcrossRestarts(t *testing.T) {
	rc := newProtoReceiver(config.PushOTLP)
	srv := httptest.NewServer(rc.handler)
	defer srv.Close()
	dir := t.TempDir()
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	var k atomic.Int32 // the clock: a second a snapshot, across the runs
	counter := 0.0
	src := func(context.Context) []*dto.MetricFamily {
		return []*dto.MetricFamily{{Name: proto.String("c_total"), Help: proto.String("h"), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(counter)}}}}}
	}
	run := func(values ...float64) *Pusher {
		p := newPusher(t, srv.URL+rc.path, src, func(c *config.Push) { c.Protocol, c.SpoolDir = config.PushOTLP, dir })
		p.now = func() time.Time { return base.Add(time.Duration(k.Load()) * time.Second) }
		for _, v := range values {
			counter = v
			p.Snapshot(context.Background())
			k.Add(1)
		}
		return p
	}
	stopped := func(p *Pusher) { // a clean shutdown: Run, cancelled at once
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.Run(ctx)
	}
	stopped(run(10, 20)) // snapshots at 0, 1
	stopped(run(30))     // 2: kept from 0
	stopped(run(5, 6))   // 3: a decrease, from 3 on
	run(7)               // 5: kept from 3; then a crash
	stopped(run(8))      // 6: nothing kept: from 6
	ms := func(s int) int64 { return base.Add(time.Duration(s) * time.Second).UnixMilli() }
	want := []int64{ms(0), ms(0), ms(0), ms(3), ms(3), ms(3), ms(6)}
	var starts []int64
	for _, a := range rc.arrivals(t)["__name__=c_total"] {
		starts = append(starts, a.start)
	}
	if !slices.Equal(starts, want) {
		t.Errorf("start times %v, want %v", starts, want)
	}
}

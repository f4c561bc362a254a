package push

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/klauspost/compress/snappy"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/prompb"

	"github.com/plexporter/plexporter/host/internal/config"
)

// counting returns a source of two series whose value is the snapshot's
// number, counted in k.
func counting(k *atomic.Int32) func(context.Context) []*dto.MetricFamily {
	return func(context.Context) []*dto.MetricFamily {
		mfs := gauges("g", "a", "b")
		v := float64(k.Add(1) - 1)
		for _, m := range mfs[0].Metric {
			m.Gauge.Value = proto.Float64(v)
		}
		return mfs
	}
}

// spoolFiles lists the spool files in dir, of every protocol.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	var all []string
	for _, ext := range spoolExts {
		m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
		all = append(all, m...)
	}
	return all
}

// TestSpoolSurvivesACrash: snapshots queued by a pusher that never sent
// them (a crash: no shutdown, no flush) are on disk, and the next pusher
// on the same spool sends them first, oldest first, then its own.
func TestSpoolSurvivesACrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	var k atomic.Int32
	spooled := func(c *config.Push) { c.SpoolDir = dir }
	crashed := newPusher(t, "http://127.0.0.1:1", counting(&k), spooled)
	for range 3 {
		crashed.Snapshot(context.Background())
	}
	if n := len(spoolFiles(t, dir)); n != 3 {
		t.Fatalf("%d spool files, want 3", n)
	}

	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p := newPusher(t, srv.URL, counting(&k), spooled)
	if got := metric(t, p, "plexporter_push_pending_samples"); got != 6 {
		t.Errorf("pending %v at start, want the spool's 6", got)
	}
	stop := runPusher(p) // its own snapshot 3
	waitFor(t, "8 samples", func() bool { _, n := rc.count(); return n == 8 })
	stop()
	var got []string
	for _, ts := range rc.got {
		got = append(got, formatFloat(ts.Samples[0].Value))
	}
	if g := strings.Join(got, ","); g != "0,0,1,1,2,2,3,3" {
		t.Errorf("arrived %s, want the earlier run's snapshots first, oldest first", g)
	}
	if n := spoolFiles(t, dir); len(n) != 0 {
		t.Errorf("spool files left after sending: %v", n)
	}
	if got := metric(t, p, "plexporter_push_spool_bytes"); got != 0 {
		t.Errorf("spool bytes %v", got)
	}
}

// TestSpoolKeepsWhatShutdownCannotSend: a clean shutdown while the
// receiver is away keeps the snapshots on disk instead of dropping them.
func TestSpoolKeepsWhatShutdownCannotSend(t *testing.T) {
	dir := t.TempDir()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer down.Close()
	var k atomic.Int32
	p := newPusher(t, down.URL, counting(&k), func(c *config.Push) { c.SpoolDir = dir; c.FlushTimeout = 50 * time.Millisecond })
	p.Snapshot(context.Background())
	p.Snapshot(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Run(ctx)
	if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "shutdown"); got != 0 {
		t.Errorf("dropped{shutdown} %v with a spool", got)
	}
	if n := len(spoolFiles(t, dir)); n != 2 {
		t.Errorf("%d spool files after shutdown, want 2", n)
	}
}

// TestSpoolBounds: files older than spool_max_age are dropped at the
// next start, and a spool over spool_max_bytes drops its oldest, both
// counted in samples.
func TestSpoolBounds(t *testing.T) {
	dir := t.TempDir()
	var k atomic.Int32
	now := time.Now()
	// A run that kept 10 hours; the next keeps the default hour.
	old := newPusher(t, "http://127.0.0.1:1", counting(&k), func(c *config.Push) { c.SpoolDir = dir; c.SpoolMaxAge = 10 * time.Hour })
	for _, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 10 * time.Minute} {
		old.now = func() time.Time { return now.Add(-age) }
		old.Snapshot(context.Background())
	}
	p := newPusher(t, "http://127.0.0.1:1", counting(&k), func(c *config.Push) { c.SpoolDir = dir })
	p.Snapshot(context.Background())
	if got := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "too_old"); got != 4 {
		t.Errorf("dropped{too_old} %v, want 4 (two files of 2 samples over an hour old)", got)
	}
	if n := len(spoolFiles(t, dir)); n != 2 {
		t.Errorf("%d files, want 2 (10 minutes old, and the new snapshot)", n)
	}

	small := newPusher(t, "http://127.0.0.1:1", counting(&k), func(c *config.Push) { c.SpoolDir = t.TempDir(); c.SpoolMaxBytes = 1 })
	for range 3 {
		small.Snapshot(context.Background())
	}
	if got := metric(t, small, "plexporter_push_samples_dropped_total", "reason", "spool_full"); got != 4 {
		t.Errorf("dropped{spool_full} %v, want 4 (all but the newest snapshot)", got)
	}
}

// TestSpoolWriteErrorKeepsTheSnapshotInMemory: a spool that cannot be
// written (here: its directory gone; a full disk alike) costs the
// snapshot its copy on disk, counted, never the snapshot or the host.
func TestSpoolWriteErrorKeepsTheSnapshotInMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var k atomic.Int32
	p := newPusher(t, srv.URL, counting(&k), func(c *config.Push) { c.SpoolDir = dir })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	p.Snapshot(context.Background())
	if got := metric(t, p, "plexporter_push_spool_errors_total"); got != 1 {
		t.Errorf("spool errors %v, want 1", got)
	}
	stop := runPusher(p)
	waitFor(t, "4 samples", func() bool { _, n := rc.count(); return n == 4 })
	stop()
}

// TestSpoolReadsEarlierFilesAndDropsBrokenOnes: a .rw1 file of an
// earlier version (one whole-snapshot request, no header) is sent, cut
// into requests of max_samples_per_send; a file that cannot be read is
// removed, its samples counted as dropped (error) and in spool_errors,
// and what follows it is sent.
func TestSpoolReadsEarlierFilesAndDropsBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	ts := time.Now().Add(-time.Minute).UnixMilli()
	var whole prompb.WriteRequest
	for i, d := range []string{"a", "b", "c"} {
		whole.Timeseries = append(whole.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: "old"}, {Name: "device", Value: d}},
			Samples: []prompb.Sample{{Value: float64(i), Timestamp: ts}},
		})
	}
	raw, err := whole.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put(fmt.Sprintf("%020d-000001-3.rw1", ts), snappy.Encode(nil, raw))
	put(fmt.Sprintf("%020d-000002-5.rw1", ts+1), []byte(spoolMagic+"\x05\xff\xff")) // a frame cut short

	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var k atomic.Int32
	p := newPusher(t, srv.URL, counting(&k), func(c *config.Push) { c.SpoolDir = dir; c.MaxSamplesPerSend = 2 })
	stop := runPusher(p) // its own snapshot: 2 samples
	waitFor(t, "5 samples", func() bool { _, n := rc.count(); return n == 5 })
	stop()
	requests, _ := rc.count()
	if requests != 3 {
		t.Errorf("%d requests, want 3 (the old file in two, then the new snapshot)", requests)
	}
	var got []string
	for _, s := range rc.got {
		got = append(got, labelMap(s.Labels)["__name__"]+"/"+labelMap(s.Labels)["device"])
	}
	if g := strings.Join(got, ","); g != "old/a,old/b,old/c,g/a,g/b" {
		t.Errorf("arrived %s", g)
	}
	if d := metric(t, p, "plexporter_push_samples_dropped_total", "reason", "error"); d != 5 {
		t.Errorf("dropped{error} %v, want the broken file's 5", d)
	}
	if e := metric(t, p, "plexporter_push_spool_errors_total"); e != 1 {
		t.Errorf("spool errors %v, want 1", e)
	}
	if n := spoolFiles(t, dir); len(n) != 0 {
		t.Errorf("files left: %v", n)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

// TestPushToRealPrometheus runs the host with push: to a real Prometheus
// (remote write receiver) and compares what Prometheus holds at one
// pushed snapshot's timestamp with what /metrics serves: the same
// merged, guarded series (the chaos plugin's duplicates dropped by the
// guard are not pushed either), with the external labels. Then the
// plugin is removed, and its series end at their staleness markers.
func TestPushToRealPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	// Prometheus scrapes nothing here (a target nobody listens on): every
	// series it holds was pushed.
	prom := startPrometheusEvery(t, bin, "127.0.0.1:1", "1h", "10s", "--web.enable-remote-write-receiver")
	waitReady(t, prom)
	h := startHost(t, []string{"alpha"}, fmt.Sprintf(`  alpha: {config: {series: 4, histograms: 2, duplicates: 2}}
push:
  url: %s/api/v1/write
  interval: 1s
  external_labels: {job: pushed, cluster: lab}
  headers: {X-Scope-OrgID: tenant-1}
`, prom))

	var at string
	h.waitFor(minWait, "a pushed snapshot in Prometheus", func() bool {
		at = query(t, prom, `max(timestamp(chaos_value{job="pushed"}))`, "")[""]
		return at != ""
	})
	t.Logf("comparing at %s", at)
	_, served := h.scrape("")
	// chaos_collects_total counts Collects: the push's and the scrape's
	// differ by design.
	fams := []string{"chaos_value", "chaos_value_seconds"}
	var want model.Vector
	for _, name := range fams {
		v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, served[name])
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v...)
	}
	got := queryAtAll(t, prom, at, `{job="pushed",__name__=~"chaos_value.*"}`)
	if len(got) != len(want) || len(want) != 4+2*(11+2) {
		t.Errorf("Prometheus holds %d chaos series at %s, /metrics serves %d (want 4 gauges + 2 histograms of 10 bounds and +Inf, _sum, _count)", len(got), at, len(want))
	}
	for _, s := range want {
		m := s.Metric.Clone()
		m["job"], m["cluster"] = "pushed", "lab"
		v, ok := got[m.String()]
		if !ok || v != float64(s.Value) {
			t.Errorf("%s: /metrics serves %v, Prometheus holds %v (present %v)", m, s.Value, v, ok)
		}
	}
	for k, v := range got {
		if v == -1 {
			t.Errorf("%s = -1: a duplicate the guard drops was pushed", k)
		}
	}
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_push_samples_sent_total") <= 0 || value(mfs, "plexporter_push_last_success_timestamp_seconds") <= 0 {
		t.Errorf("push self-metrics: sent %v, last success %v", value(mfs, "plexporter_push_samples_sent_total"), value(mfs, "plexporter_push_last_success_timestamp_seconds"))
	}
	if v := value(mfs, "plexporter_push_samples_dropped_total", "reason", "rejected"); v != 0 {
		t.Errorf("rejected samples: %v", v)
	}

	// The plugin goes: its series get staleness markers in the next push,
	// so Prometheus stops answering them at once, not after 5 minutes.
	if err := os.Remove(filepath.Join(h.dir, "plexporter-alpha")); err != nil {
		t.Fatal(err)
	}
	h.waitFor(minWait, "the removed plugin's pushed series to end", func() bool {
		return len(query(t, prom, `chaos_value{job="pushed"}`, "i")) == 0 && query(t, prom, `count(plexporter_build_info{job="pushed"})`, "")[""] == "1"
	})
}

// waitReady waits for Prometheus's /-/ready.
func waitReady(t *testing.T, promURL string) {
	t.Helper()
	deadline := time.Now().Add(minWait)
	for time.Now().Before(deadline) {
		if len(query(t, promURL, "vector(1)", "")) == 1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("prometheus not ready")
}

// queryAtAll evaluates q at the instant at and returns every series'
// value by its whole label set (model.Metric.String()).
func queryAtAll(t *testing.T, promURL, at, q string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(q) + "&time=" + url.QueryEscape(at))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric model.Metric `json:"metric"`
				Value  [2]any       `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	for _, r := range body.Data.Result {
		f, err := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		out[r.Metric.String()] = f
	}
	return out
}

// TestPushSpoolSurvivesAHostCrash: the host pushes to a receiver that is
// not there yet, is killed (SIGKILL: no flush), and a new host on the same
// spool sends the first one's snapshots, once the receiver is up, before
// its own: Prometheus then holds a sample at every spooled timestamp.
func TestPushSpoolSurvivesAHostCrash(t *testing.T) {
	bin := prometheusBinary(t)
	addr := freePort(t)
	spool := filepath.Join(t.TempDir(), "spool")
	cfg := fmt.Sprintf(`  alpha: {config: {series: 2}}
push:
  url: http://%s/api/v1/write
  interval: 500ms
  external_labels: {job: pushed}
  min_backoff: 50ms
  max_backoff: 200ms
  spool_dir: %s
`, addr, spool)
	first := startHost(t, []string{"alpha"}, cfg)
	var files []string
	first.waitFor(minWait, "three snapshots spooled", func() bool {
		files, _ = filepath.Glob(filepath.Join(spool, "*.rw1"))
		return len(files) >= 3
	})
	first.cmd.Process.Kill()
	first.cmd.Wait()
	files, _ = filepath.Glob(filepath.Join(spool, "*.rw1"))
	var stamps []string
	for _, f := range files {
		ms, _, _ := strings.Cut(filepath.Base(f), "-")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, strconv.FormatFloat(float64(n)/1000, 'f', 3, 64))
	}
	t.Logf("the killed host left %d snapshots in the spool", len(stamps))

	second := startHost(t, []string{"alpha"}, cfg)
	startReceiverAt(t, bin, addr)
	second.waitFor(minWait, "the spool emptied", func() bool {
		left, _ := filepath.Glob(filepath.Join(spool, "*.rw1"))
		for _, l := range left {
			if slices.Contains(files, l) {
				return false
			}
		}
		return true
	})
	for _, at := range stamps {
		// The host's own build_info is in every snapshot (the first may
		// come before the plugin's first answer).
		got := queryAtAll(t, "http://"+addr, at, `timestamp(plexporter_build_info{job="pushed"})`)
		if len(got) != 1 {
			t.Errorf("at %s Prometheus has %v: the killed host's snapshot is missing", at, got)
			continue
		}
		for _, v := range got {
			if strconv.FormatFloat(v, 'f', 3, 64) != at {
				t.Errorf("at %s the latest sample is from %v", at, v)
			}
		}
	}
	_, mfs := second.scrape("")
	if v := value(mfs, "plexporter_push_samples_dropped_total", "reason", "rejected"); v != 0 {
		t.Errorf("rejected samples: %v (out of order?)", v)
	}
}

// startReceiverAt runs Prometheus as a remote write receiver on addr,
// scraping nothing.
func startReceiverAt(t *testing.T, bin, addr string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--web.enable-remote-write-receiver")
	logs := &syncbuf.Buffer{}
	prom.Stdout, prom.Stderr = logs, logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Process.Kill()
		prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	waitReady(t, "http://"+addr)
}

// TestPushSectionChangeOnReloadIsSaid: push: is read at start; a reload
// that changes it logs that it takes a restart, once, and the push goes
// on with its settings.
func TestPushSectionChangeOnReloadIsSaid(t *testing.T) {
	push := "push:\n  url: http://127.0.0.1:1/api/v1/write\n  flush_timeout: 100ms\n  interval: %s\n"
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 1}}\n"+fmt.Sprintf(push, "1h"))
	const said = "the push: section of the config file changed"
	h.writeConfig("  alpha: {config: {series: 1}}\n" + fmt.Sprintf(push, "30s"))
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitFor(minWait, "the change said", func() bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_config_last_reload_successful") == 1 && strings.Contains(h.logs.String(), said)
	})
	_, mfs := h.scrape("")
	first := value(mfs, "plexporter_config_last_reload_success_timestamp_seconds")
	h.cmd.Process.Signal(syscall.SIGHUP) // the same file again: nothing more to say
	h.waitFor(minWait, "the second reload", func() bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_config_last_reload_success_timestamp_seconds") > first
	})
	if n := strings.Count(h.logs.String(), said); n != 1 {
		t.Errorf("said %d times, want once", n)
	}
	_, mfs = h.scrape("")
	if value(mfs, "plexporter_push_pending_samples") < 0 {
		t.Error("push self-metrics gone after the reload")
	}
}

// TestPushNativeHistogramToRealPrometheus runs the host with the native
// test plugin and push: to a real Prometheus with native histograms on:
// the plugin's native histogram arrives as one, the classic buckets it
// serves beside it are not pushed (Prometheus ingests one or the other),
// and at a pushed snapshot's instant its distribution is the one /metrics
// serves: the same mean, a median of exactly 1 s and a 20th percentile of
// exactly 0.5 s (bucket boundaries).
func TestPushNativeHistogramToRealPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	prom := startPrometheusEvery(t, bin, "127.0.0.1:1", "1h", "10s", "--web.enable-remote-write-receiver", "--enable-feature=native-histograms")
	waitReady(t, prom)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(binDir, "native"), filepath.Join(dir, "plexporter-native")); err != nil {
		t.Fatal(err)
	}
	h := startHostIn(t, dir, fmt.Sprintf(`  native: {}
push:
  url: %s/api/v1/write
  interval: 1s
  external_labels: {job: pushed}
`, prom))
	var at string
	h.waitFor(minWait, "a pushed native histogram in Prometheus", func() bool {
		if len(query(t, prom, `histogram_count(native_latency_seconds{job="pushed"})`, "job")) == 0 {
			return false
		}
		at = query(t, prom, `max(timestamp(plexporter_build_info{job="pushed"}))`, "")[""]
		return at != ""
	})
	t.Logf("comparing at %s", at)
	num := func(q string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(queryAt(t, prom, at, q, "")[""], 64)
		if err != nil {
			t.Errorf("%s at %s: no value", q, at)
			return math.NaN()
		}
		return v
	}
	_, served := h.scrape("")
	mf := served["native_latency_seconds"]
	if mf == nil || len(mf.GetMetric()) != 1 {
		t.Fatalf("/metrics serves native_latency_seconds as %v", mf)
	}
	sh := mf.GetMetric()[0].GetHistogram()
	servedMean := sh.GetSampleSum() / float64(sh.GetSampleCount())
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	count := num(`histogram_count(native_latency_seconds{job="pushed"})`)
	if count <= 0 || math.Mod(count, 100) != 0 {
		t.Errorf("pushed histogram_count %v, want a positive multiple of 100 (the plugin's 100 observations per collect)", count)
	}
	if mean := num(`histogram_sum(native_latency_seconds{job="pushed"}) / histogram_count(native_latency_seconds{job="pushed"})`); !near(mean, servedMean) {
		t.Errorf("pushed mean %v, /metrics serves %v", mean, servedMean)
	}
	if q := num(`histogram_quantile(0.5, native_latency_seconds{job="pushed"})`); !near(q, 1) {
		t.Errorf("histogram_quantile(0.5) over the pushed native histogram = %v, want 1", q)
	}
	if q := num(`histogram_quantile(0.2, native_latency_seconds{job="pushed"})`); !near(q, 0.5) {
		t.Errorf("histogram_quantile(0.2) over the pushed native histogram = %v, want 0.5", q)
	}
	if n := queryAt(t, prom, at, `{job="pushed",__name__=~"native_latency_seconds_.+"}`, "__name__"); len(n) != 0 {
		t.Errorf("classic series pushed with the native histogram: %v", n)
	}
}

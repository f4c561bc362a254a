package main

// A real Prometheus scrapes a native histogram from the host's protobuf
// exposition and computes quantiles from it; text scrapers of the same host
// get the classic buckets (internal/testkit/testplugins/native has the
// distribution).

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRealPrometheusNativeHistogram(t *testing.T) {
	bin := prometheusBinary(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(binDir, "native"), filepath.Join(dir, "plexporter-native")); err != nil {
		t.Fatal(err)
	}
	h := startHostIn(t, dir, "  native: {}\n")

	// Text scrapers: the classic buckets beside the native histogram, and
	// nothing promtool finds wrong.
	text, mfs := h.scrape("")
	for _, want := range []string{`native_latency_seconds_bucket{le="0.5"} `, `native_latency_seconds_bucket{le="1"} `, `native_latency_seconds_bucket{le="2"} `, `native_latency_seconds_bucket{le="+Inf"} `} {
		if !strings.Contains(text, want) {
			t.Errorf("text exposition lacks %s…", want)
		}
	}
	if mf := mfs["native_latency_seconds"]; mf == nil || len(mf.GetMetric()) != 1 || len(mf.GetMetric()[0].GetHistogram().GetBucket()) != 4 {
		t.Errorf("text exposition: %v, want one histogram with 3 classic buckets and +Inf", mf)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) != 0 {
			t.Errorf("promtool check metrics on the host's text exposition: %v\n%s", err, out)
		}
	}

	promURL := startPrometheus(t, bin, h.url, "900ms", "--enable-feature=native-histograms")
	h.waitFor(30*time.Second, "Prometheus to scrape the host successfully", func() bool {
		return query(t, promURL, `up{job="plexporter"}`, "job")["plexporter"] == "1"
	})
	// The distribution's median is exactly 1 s and its 20th percentile
	// exactly 0.5 s (bucket boundaries); rate() needs two scrapes in the
	// window, so wait for the answer.
	quantile := func(at, q string) float64 {
		v, err := strconv.ParseFloat(queryAt(t, promURL, at, `histogram_quantile(`+q+`, rate(native_latency_seconds[1m]))`, "")[""], 64)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	h.waitFor(30*time.Second, "a quantile over the native series", func() bool { return !math.IsNaN(quantile("", "0.5")) })
	// Every number below at one instant whose scrapes are all ingested.
	at := settledInstant(t, h, promURL)
	if got := quantile(at, "0.5"); !near(got, 1) {
		t.Errorf("histogram_quantile(0.5) over the native histogram = %v, want 1", got)
	}
	if got := quantile(at, "0.2"); !near(got, 0.5) {
		t.Errorf("histogram_quantile(0.2) over the native histogram = %v, want 0.5", got)
	}
	// The rate's sum over its count is the distribution's mean: 100
	// observations per collect summing to 105 s.
	mean, _ := strconv.ParseFloat(queryAt(t, promURL, at, `histogram_sum(rate(native_latency_seconds[1m])) / histogram_count(rate(native_latency_seconds[1m]))`, "")[""], 64)
	if !near(mean, 1.05) {
		t.Errorf("mean of the native histogram's rate = %v, want 1.05 s", mean)
	}
	// Prometheus took the native histogram, not the classic buckets beside
	// it (2.42 ingests one or the other).
	if n := queryAt(t, promURL, at, `count(native_latency_seconds_bucket)`, ""); len(n) != 0 {
		t.Errorf("classic bucket series in Prometheus: %v, want none once the native histogram is scraped", n)
	}
}

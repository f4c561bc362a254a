package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The 100k-series scrape: 61,000 gauges and 3,000 10-bucket histograms
// (13 series each), from one chaos plugin through the real host, against the
// same series from an in-process client_golang registry served by promhttp.
// Run: go test ./host -run XXX -bench Scrape100k -benchtime 20x
const (
	benchGauges     = 61000
	benchHistograms = 3000
)

// cpuTicks returns utime+stime of pid and its plugin children, in clock ticks.
func cpuTicks(pids ...int) float64 {
	var total float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += u + st
	}
	return total
}

func childPIDs(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func benchGet(b *testing.B, url string, header map[string]string, pids func() []int) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func() int64 {
		req, _ := http.NewRequest("GET", url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return n
	}
	size := get() // warm up
	ps := pids()
	before := cpuTicks(ps...)
	b.ResetTimer()
	for b.Loop() {
		get()
	}
	b.StopTimer()
	ticks := cpuTicks(ps...) - before
	b.ReportMetric(ticks*10/float64(b.N), "cpu-ms/op") // USER_HZ = 100
	b.ReportMetric(float64(size), "bytes/op")
}

func BenchmarkScrape100k(b *testing.B) {
	h := startBenchHost(b)
	self := func() []int { return append([]int{h.cmd.Process.Pid}, childPIDs(h.cmd.Process.Pid)...) }
	b.Run("plexporter/text", func(b *testing.B) {
		benchGet(b, h.url+"/metrics", map[string]string{"Accept": "text/plain;version=0.0.4"}, self)
	})
	b.Run("plexporter/text-gzip", func(b *testing.B) {
		benchGet(b, h.url+"/metrics", map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}, self)
	})
	b.Run("plexporter/openmetrics", func(b *testing.B) {
		benchGet(b, h.url+"/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"}, self)
	})
	b.Run("plexporter/protobuf", func(b *testing.B) {
		benchGet(b, h.url+"/metrics", map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}, self)
	})

	// Baseline: the same series in-process with client_golang + promhttp.
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chaos_value", Help: "Test series."}, []string{"plugin", "i"})
	hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chaos_value_seconds", Help: "Test histogram.", Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1}}, []string{"plugin", "i"})
	reg.MustRegister(g, hv)
	for i := range benchGauges {
		g.WithLabelValues("bench", strconv.Itoa(i)).Set(float64(i))
	}
	for i := range benchHistograms {
		hv.WithLabelValues("bench", strconv.Itoa(i)).Observe(0.003)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	inproc := func() []int { return []int{os.Getpid()} }
	b.Run("client_golang/text", func(b *testing.B) {
		benchGet(b, srv.URL, map[string]string{"Accept": "text/plain;version=0.0.4"}, inproc)
	})
	b.Run("client_golang/text-gzip", func(b *testing.B) {
		benchGet(b, srv.URL, map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}, inproc)
	})
}

func startBenchHost(b *testing.B) *host {
	h := startHost(b, []string{"bench"}, fmt.Sprintf("  bench: {config: {series: %d, histograms: %d}, timeout: 30s, max_series: 200000}\n", benchGauges, benchHistograms))
	time.Sleep(100 * time.Millisecond)
	return h
}

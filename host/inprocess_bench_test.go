package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkHostInProcess runs the host inside the test process — run(), as
// main does — with its plugins as separate processes, so that
// `go test -cpuprofile` sees the host's side of a scrape:
//
//	go test ./host -run '^$' -bench 'HostInProcess/text$' -benchtime 30x -cpuprofile host.pprof
//	go tool pprof -top host.pprof
//
// The profile also holds the benchmark's HTTP client (net/http client
// functions) and, at the start, the host's own start. cpu-ms/op is the test
// process only (host + client), without the plugins. By default it serves the
// 100k chaos series of BenchmarkScrape100k; the performance harness
// (internal/dev/bench) points it at its own plugin directory and
// config with PERFHARNESS_PLUGIN_DIR and PERFHARNESS_CONFIG, and passes
// further host flags in PERFHARNESS_ARGS (space-separated).
func BenchmarkHostInProcess(b *testing.B) {
	url := inProcessHost(b)
	self := func() []int { return []int{os.Getpid()} }
	b.Run("text", func(b *testing.B) {
		benchGet(b, url, map[string]string{"Accept": "text/plain;version=0.0.4"}, self)
	})
	b.Run("text-gzip", func(b *testing.B) {
		benchGet(b, url, map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}, self)
	})
	b.Run("openmetrics", func(b *testing.B) {
		benchGet(b, url, map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"}, self)
	})
	b.Run("protobuf", func(b *testing.B) {
		benchGet(b, url, map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}, self)
	})
}

var inProcess struct {
	once sync.Once
	url  string
	err  error
}

// inProcessHost starts run() once per test binary (it never returns; the
// plugins exit through their lifeline when the test process ends).
func inProcessHost(b *testing.B) string {
	inProcess.once.Do(func() {
		dir, cfg := os.Getenv("PERFHARNESS_PLUGIN_DIR"), os.Getenv("PERFHARNESS_CONFIG")
		if dir == "" {
			// binDir is removed by TestMain at the end.
			dir = filepath.Join(binDir, "inprocess-plugins")
			cfg = filepath.Join(binDir, "inprocess.yml")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				inProcess.err = err
				return
			}
			if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-bench")); err != nil {
				inProcess.err = err
				return
			}
			// max_series: the chaos plugin adds chaos_collects_total to its 100k series.
			body := fmt.Sprintf("plugins:\n  bench: {config: {series: %d, histograms: %d}, timeout: 30s, max_series: 1000000}\n", benchGauges, benchHistograms)
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				inProcess.err = err
				return
			}
		}
		addr := freePort(b)
		// The test binary cannot act as the sandbox launcher (main does that),
		// so the plugins run unconfined; that changes nothing on the host side.
		args := []string{"--plugin.dir=" + dir, "--config.file=" + cfg, "--web.listen-address=" + addr, "--log.level=warn", "--no-plugin.sandbox"}
		go run(append(args, strings.Fields(os.Getenv("PERFHARNESS_ARGS"))...))
		inProcess.url = "http://" + addr + "/metrics"
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if resp, err := http.Get("http://" + addr + "/ready"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		inProcess.err = fmt.Errorf("in-process host not ready after 60s")
	})
	if inProcess.err != nil {
		b.Fatal(inProcess.err)
	}
	return inProcess.url
}

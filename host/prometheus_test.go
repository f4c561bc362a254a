package main

// A real Prometheus server (Debian's prometheus package) scrapes the host:
// the exposition, content negotiation and the scrape timeout header are
// proven against the consumer that matters.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk/sdktest"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

func prometheusBinary(t *testing.T) string {
	t.Helper()
	return sdktest.PrometheusBinary(t, "prometheus")
}

// startPrometheus runs the Prometheus server bin with one job, plexporter,
// that scrapes the host at hostURL every second with the given timeout, and
// returns the server's URL. It stops with the test and logs its output if
// the test failed.
func startPrometheus(t *testing.T, bin, hostURL, scrapeTimeout string, flags ...string) string {
	t.Helper()
	return startPrometheusEvery(t, bin, hostURL, "1s", scrapeTimeout, flags...)
}

// startPrometheusEvery is startPrometheus with another scrape interval.
func startPrometheusEvery(t *testing.T, bin, hostURL, interval, scrapeTimeout string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
scrape_configs:
  - job_name: plexporter
    static_configs:
      - targets: [%q]
`, interval, scrapeTimeout, strings.TrimPrefix(hostURL, "http://"))), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	prom := exec.Command(bin, append([]string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr}, flags...)...)
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
	return "http://" + addr
}

// query runs an instant query at the current time and returns the result
// vector's values by the given label: what a test polls while it waits for
// Prometheus to have something. Numbers a test compares are read with
// queryAt at one settled instant instead.
func query(t *testing.T, promURL, q, label string) map[string]string {
	t.Helper()
	return queryAt(t, promURL, "", q, label)
}

// queryAt runs an instant query evaluated at the instant at (Prometheus's
// time parameter: Unix seconds; "" is now) and returns the result vector's
// values by the given label.
func queryAt(t *testing.T, promURL, at, q, label string) map[string]string {
	t.Helper()
	u := promURL + "/api/v1/query?query=" + url.QueryEscape(q)
	if at != "" {
		u += "&time=" + url.QueryEscape(at)
	}
	resp, err := http.Get(u)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		return nil
	}
	out := map[string]string{}
	for _, r := range body.Data.Result {
		out[r.Metric[label]] = fmt.Sprint(r.Value[1])
	}
	return out
}

// settledInstant returns the instant (Unix seconds, as the query API
// takes it) at which the test evaluates every number it compares: that of
// the last scrape of job plexporter that Prometheus has ingested. A
// scrape's samples carry its start time but are appended when it ends, so
// "now" or a moment just past may still lack a scrape under way, and two
// queries at different moments may count different scrapes ("13 of 12
// scrapes up"). Prometheus scrapes a target one scrape after the other,
// appending its samples and up together, so every scrape up to the last
// one ingested is in: at that instant the answers are final.
func settledInstant(t *testing.T, h *host, promURL string) string {
	t.Helper()
	var at string
	h.waitFor(minWait, "a scrape of plexporter ingested by Prometheus", func() bool {
		at = query(t, promURL, `timestamp(up{job="plexporter"})`, "job")["plexporter"]
		return at != ""
	})
	t.Logf("evaluating at %s", at)
	return at
}

// Prometheus 2.42 negotiates OpenMetrics by default and the protobuf format
// once native histograms are enabled: both paths are scraped for real.
func TestRealPrometheusScrapesTheHost(t *testing.T) {
	for name, flags := range map[string][]string{
		"openmetrics": nil,
		"protobuf":    {"--enable-feature=native-histograms"},
	} {
		t.Run(name, func(t *testing.T) { realPrometheusScrape(t, flags) })
	}
}

func realPrometheusScrape(t *testing.T, promFlags []string) {
	bin := prometheusBinary(t)
	h := startHost(t, []string{"alpha", "beta"}, `
  alpha: {config: {series: 3, histograms: 1}}
  beta: {config: {series: 2, duplicates: 1}}
`)
	promURL := startPrometheus(t, bin, h.url, "900ms", promFlags...)
	h.waitFor(30*time.Second, "Prometheus to scrape the host successfully", func() bool {
		return query(t, promURL, `up{job="plexporter"}`, "job")["plexporter"] == "1"
	})
	h.waitFor(10*time.Second, "plugin series in Prometheus", func() bool {
		got := query(t, promURL, `chaos_value`, "plugin")
		return len(got) == 2
	})
	at := settledInstant(t, h, promURL)
	if n := queryAt(t, promURL, at, `count(chaos_value{plugin="alpha"})`, "")[""]; n != "3" {
		t.Errorf("alpha series in Prometheus = %q, want 3", n)
	}
	if v := queryAt(t, promURL, at, `chaos_value_seconds_count{plugin="alpha"}`, "plugin")["alpha"]; v != "11" {
		t.Errorf("histogram count in Prometheus = %q, want 11", v)
	}
	if n := queryAt(t, promURL, at, `count(chaos_value_seconds_bucket{plugin="alpha"})`, "")[""]; n != "11" {
		t.Errorf("histogram bucket series in Prometheus = %q, want 11 (10 bounds and +Inf, once)", n)
	}
	if v := queryAt(t, promURL, at, `plexporter_dropped_series_total{plugin="beta",reason="duplicate"} > 0`, "plugin")["beta"]; v == "" {
		t.Error("the guard's drop counter did not reach Prometheus")
	}
	if v := queryAt(t, promURL, at, `scrape_samples_scraped{job="plexporter"}`, "job")["plexporter"]; v == "" || v == "0" {
		t.Errorf("scrape_samples_scraped = %q", v)
	}
}

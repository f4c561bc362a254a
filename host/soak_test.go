package main

// The soak test: a real Prometheus scrapes the host every 2 s for two
// minutes while plugins are killed, one hangs, one floods, and a second
// scraper with another timeout overlaps Prometheus's scrapes. Prometheus's
// own view (its HTTP API) must show that the target never went down and
// that the healthy plugins' series have no gaps.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// soakDuration is two minutes in CI; PLEXPORTER_SOAK_SECONDS shortens it
// for a quick local run.
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("PLEXPORTER_SOAK_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("PLEXPORTER_SOAK_SECONDS=%q: want a number of seconds >= 10", s)
		}
		return time.Duration(n) * time.Second
	}
	return 120 * time.Second
}

func TestSoakRealPrometheusUnderChaos(t *testing.T) {
	// Two minutes: CI runs it (PLEXPORTER_REQUIRE_PROMTOOL=1, as .ci/run
	// sets), a developer asks for it with PLEXPORTER_SOAK_SECONDS.
	if testing.Short() || os.Getenv("PLEXPORTER_REQUIRE_PROMTOOL") == "" && os.Getenv("PLEXPORTER_SOAK_SECONDS") == "" {
		t.Skip("soak test (2 minutes): set PLEXPORTER_SOAK_SECONDS=30 to run a short one, CI runs it in full")
	}
	bin := prometheusBinary(t)
	soak := soakDuration(t)

	dir := t.TempDir()
	for _, name := range []string{"healthy", "victim", "hung", "flood"} {
		if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	shipped, _ := filepath.Glob(filepath.Join(binDir, "shipped", "plexporter-*"))
	var shippedNames []string
	for _, p := range shipped {
		if strings.HasSuffix(p, ".yaml") {
			continue
		}
		if err := os.Symlink(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
		shippedNames = append(shippedNames, strings.TrimPrefix(filepath.Base(p), "plexporter-"))
	}
	victimPIDs := filepath.Join(t.TempDir(), "victim.pid")
	h := startHostIn(t, dir, fmt.Sprintf(`
  healthy: {config: {series: 200, histograms: 20}}
  victim: {config: {series: 50, pid_file: %q}}
  hung: {config: {sleep: 1h, ignore_deadline: true}}
  flood: {max_series: 20000, config: {series: 2000000}}
`, victimPIDs))

	// Every 5 s with a 5 s timeout: the host cuts the hung plugin at 4.5 s
	// (the timeout less its 0.5 s margin). Plugins run at nice 10, and
	// here unsandboxed, so outside any cgroup: on a machine loaded by other
	// work (load 15 on 2 cores) a healthy plugin's collect missed a 1.5 s
	// cut once in 60 scrapes (a 1 s timeout missed one in 24 at load 30,
	// before plugins were niced). The hung plugin still never answers.
	const interval = 5 * time.Second
	promURL := startPrometheusEvery(t, bin, h.url, interval.String(), interval.String())
	h.waitFor(30*time.Second, "Prometheus's first successful scrape", func() bool {
		return query(t, promURL, `up{job="plexporter"}`, "job")["plexporter"] == "1"
	})
	// The window the numbers are about begins after this scrape.
	began := query(t, promURL, `timestamp(up{job="plexporter"})`, "job")["plexporter"]
	beganAt, err := strconv.ParseFloat(began, 64)
	if err != nil {
		t.Fatalf("timestamp of Prometheus's first scrape: %q", began)
	}

	stop := make(chan struct{})
	done := make(chan struct{}, 2)
	// every runs fn every d until the soak ends.
	every := func(d time.Duration, fn func()) {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(d):
				fn()
			}
		}
	}
	// A second scraper (an HA twin with a longer timeout) overlapping
	// Prometheus's scrapes: the shared work must not make Prometheus wait
	// beyond its own deadline.
	go every(300*time.Millisecond, func() {
		req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	// The killer: SIGKILL the victim plugin every 10 s.
	var kills atomic.Int64
	go every(10*time.Second, func() {
		b, err := os.ReadFile(victimPIDs)
		if err != nil {
			return
		}
		pid, _ := strconv.Atoi(strings.Fields(string(b) + " 0")[0])
		if pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
			kills.Add(1)
		}
	})
	// The soak lasts its duration and until the chaos and the scrapes it
	// is about have happened: the test counts them, not its own clock (a
	// loaded machine fires timers late, and Prometheus may skip ticks).
	wantKills, wantScrapes := int64(soak/(10*time.Second))-1, int(soak/interval)*3/4
	before, _ := strconv.Atoi(queryAt(t, promURL, began, `count_over_time(up{job="plexporter"}[1h])`, "job")["plexporter"])
	scraped := func() int {
		n, _ := strconv.Atoi(query(t, promURL, `count_over_time(up{job="plexporter"}[1h])`, "job")["plexporter"])
		return n - before
	}
	time.Sleep(soak)
	h.waitFor(3*soak, fmt.Sprintf("%d kills of the victim and %d scrapes by Prometheus", wantKills, wantScrapes), func() bool {
		return kills.Load() >= wantKills && scraped() >= wantScrapes
	})
	close(stop)
	<-done
	<-done

	// Every number below at one instant, that of the last scrape
	// Prometheus has ingested (settledInstant), over the window since the
	// first one.
	at := settledInstant(t, h, promURL)
	atSec, _ := strconv.ParseFloat(at, 64)
	window := fmt.Sprintf("[%dms]", int64((atSec-beganAt)*1000))
	q := func(expr, label string) map[string]string { return queryAt(t, promURL, at, expr, label) }

	scrapes := q(`count_over_time(up{job="plexporter"}`+window+`)`, "job")["plexporter"]
	if n, _ := strconv.Atoi(scrapes); n < wantScrapes {
		t.Fatalf("Prometheus recorded %q scrapes in the soak's window %s, want at least %d", scrapes, window, wantScrapes)
	}
	if v := q(`min_over_time(up{job="plexporter"}`+window+`)`, "job")["plexporter"]; v != "1" {
		ok := q(`sum_over_time(up{job="plexporter"}`+window+`)`, "job")["plexporter"]
		t.Errorf("up went to 0 during the soak: min(up) = %q, %s of %s scrapes succeeded", v, ok, scrapes)
	}
	// Healthy plugins answered every scrape: one sample per scrape for each
	// of their series, no gaps.
	for _, p := range append([]string{"healthy"}, shippedNames...) {
		got := q(fmt.Sprintf(`count_over_time(plexporter_plugin_scrape_success{plugin=%q}%s)`, p, window), "plugin")[p]
		if got != scrapes {
			t.Errorf("plugin %s: %s scrape_success samples over %s scrapes", p, got, scrapes)
		}
		if v := q(fmt.Sprintf(`min_over_time(plexporter_plugin_scrape_success{plugin=%q}%s)`, p, window), "plugin")[p]; v != "1" {
			t.Errorf("plugin %s: a scrape without its answer during the soak (min scrape_success %q)", p, v)
		}
	}
	series := q(`count_over_time(chaos_value{plugin="healthy",i="199"}`+window+`)`, "plugin")["healthy"]
	if series != scrapes {
		t.Errorf("healthy plugin's series has %s samples over %s scrapes (gaps)", series, scrapes)
	}
	// The chaos happened as planned: the flood was capped, the hung plugin
	// contributed nothing, the victim came back after each kill.
	if v := q(`max_over_time(plexporter_plugin_series{plugin="flood"}`+window+`)`, "plugin")["flood"]; v == "" || v == "0" {
		t.Errorf("flood plugin series = %q, want its capped share", v)
	}
	if v := q(`max_over_time(plexporter_plugin_scrape_success{plugin="hung"}`+window+`)`, "plugin")["hung"]; v != "0" {
		t.Errorf("hung plugin scrape_success max = %q, want 0", v)
	}
	h.waitFor(minWait, "the victim plugin up after the soak (restarted after every kill)", func() bool {
		return query(t, promURL, `plexporter_plugin_up{plugin="victim"}`, "plugin")["victim"] == "1"
	})
}

package main

// The soak test: a real Prometheus scrapes the host every second for two
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

	promURL := startPrometheus(t, bin, h.url, "1s")
	h.waitFor(30*time.Second, "Prometheus's first successful scrape", func() bool {
		return query(t, promURL, `up{job="plexporter"}`, "job")["plexporter"] == "1"
	})
	began := time.Now()

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
	kills := 0
	go every(10*time.Second, func() {
		b, err := os.ReadFile(victimPIDs)
		if err != nil {
			return
		}
		pid, _ := strconv.Atoi(strings.Fields(string(b) + " 0")[0])
		if pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
			kills++
		}
	})
	time.Sleep(soak)
	close(stop)
	<-done
	<-done
	// Let Prometheus finish its last scrape before asking about the window.
	time.Sleep(2 * time.Second)
	window := fmt.Sprintf("[%ds]", int(time.Since(began).Seconds()))

	if kills < int(soak/(10*time.Second))-1 {
		t.Errorf("the victim plugin was killed %d times in %v; the chaos did not happen", kills, soak)
	}
	scrapes := query(t, promURL, `count_over_time(up{job="plexporter"}`+window+`)`, "job")["plexporter"]
	if n, _ := strconv.Atoi(scrapes); n < int(soak.Seconds())*3/4 {
		t.Fatalf("Prometheus recorded %q scrapes in %v at a 1 s interval", scrapes, soak)
	}
	if v := query(t, promURL, `min_over_time(up{job="plexporter"}`+window+`)`, "job")["plexporter"]; v != "1" {
		ok := query(t, promURL, `sum_over_time(up{job="plexporter"}`+window+`)`, "job")["plexporter"]
		t.Errorf("up went to 0 during the soak: min(up) = %q, %s of %s scrapes succeeded", v, ok, scrapes)
	}
	// Healthy plugins answered every scrape: one sample per scrape for each
	// of their series, no gaps.
	for _, p := range append([]string{"healthy"}, shippedNames...) {
		got := query(t, promURL, fmt.Sprintf(`count_over_time(plexporter_plugin_scrape_success{plugin=%q}%s)`, p, window), "plugin")[p]
		if got != scrapes {
			t.Errorf("plugin %s: %s scrape_success samples over %s scrapes", p, got, scrapes)
		}
		if v := query(t, promURL, fmt.Sprintf(`min_over_time(plexporter_plugin_scrape_success{plugin=%q}%s)`, p, window), "plugin")[p]; v != "1" {
			t.Errorf("plugin %s: a scrape without its answer during the soak (min scrape_success %q)", p, v)
		}
	}
	series := query(t, promURL, `count_over_time(chaos_value{plugin="healthy",i="199"}`+window+`)`, "plugin")["healthy"]
	if series != scrapes {
		t.Errorf("healthy plugin's series has %s samples over %s scrapes (gaps)", series, scrapes)
	}
	// The chaos happened as planned: the flood was capped, the hung plugin
	// contributed nothing, the victim came back after each kill.
	if v := query(t, promURL, `max_over_time(plexporter_plugin_series{plugin="flood"}`+window+`)`, "plugin")["flood"]; v == "" || v == "0" {
		t.Errorf("flood plugin series = %q, want its capped share", v)
	}
	if v := query(t, promURL, `max_over_time(plexporter_plugin_scrape_success{plugin="hung"}`+window+`)`, "plugin")["hung"]; v != "0" {
		t.Errorf("hung plugin scrape_success max = %q, want 0", v)
	}
	if v := query(t, promURL, `plexporter_plugin_up{plugin="victim"}`, "plugin")["victim"]; v != "1" {
		t.Errorf("victim plugin up = %q after the soak, want 1 (restarted after every kill)", v)
	}
}

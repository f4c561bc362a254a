package main

// Overlapping scrapes of one selection share the plugins' answers, not their
// waits: each scrape leaves by its own deadline and reports what it waited.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// timedScrape is one scrape's families and how long it took.
type timedScrape struct {
	mfs  map[string]*dto.MetricFamily
	took time.Duration
	err  error
}

// scrapeWithTimeout scrapes /metrics, announcing Prometheus's scrape
// timeout when timeout is not "".
func (h *host) scrapeWithTimeout(timeout string) timedScrape {
	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	if timeout != "" {
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return timedScrape{err: err}
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != 200 {
		return timedScrape{err: fmt.Errorf("status %d, %v: %s", resp.StatusCode, err, body)}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	return timedScrape{mfs: mfs, took: took, err: err}
}

// A scrape with a 1 s Prometheus timeout that arrives while a scrape
// without one waits for a slow plugin leaves by its own deadline, with the
// fast plugin's series and the slow one marked failed; the first scrape
// still gets the slow plugin's series when it answers.
func TestJoiningScrapeLeavesByItsOwnDeadline(t *testing.T) {
	h := startHost(t, []string{"fast", "slow"}, `
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: 3s}, timeout: 10s}
`)
	patient := make(chan timedScrape, 1)
	go func() { patient <- h.scrapeWithTimeout("") }()
	time.Sleep(300 * time.Millisecond) // the first scrape's round is under way

	hurried := h.scrapeWithTimeout("1")
	if hurried.err != nil {
		t.Fatal(hurried.err)
	}
	t.Logf("the scrape with a 1 s timeout that joined took %v", hurried.took)
	if hurried.took > 900*time.Millisecond {
		t.Errorf("the joining scrape took %v, beyond its own 1 s Prometheus timeout (less the 0.5 s margin)", hurried.took)
	}
	if count(hurried.mfs, "chaos_value", "plugin", "fast") != 1 || count(hurried.mfs, "chaos_value", "plugin", "slow") != 0 {
		t.Error("the joining scrape must have the fast plugin's series and not the slow one's")
	}
	if value(hurried.mfs, "plexporter_plugin_scrape_success", "plugin", "slow") != 0 || value(hurried.mfs, "plexporter_plugin_scrape_success", "plugin", "fast") != 1 {
		t.Error("the joining scrape must report the slow plugin failed and the fast one succeeded")
	}
	if d := value(hurried.mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow"); d < 0 || d > hurried.took.Seconds() {
		t.Errorf("the joining scrape reports %v s for the slow plugin; it waited at most %v", d, hurried.took)
	}

	first := <-patient
	if first.err != nil {
		t.Fatal(first.err)
	}
	if first.took < 2500*time.Millisecond || value(first.mfs, "plexporter_plugin_scrape_success", "plugin", "slow") != 1 || count(first.mfs, "chaos_value", "plugin", "slow") != 1 {
		t.Errorf("the scrape without a timeout must wait for the slow plugin (took %v, success %v)", first.took, value(first.mfs, "plexporter_plugin_scrape_success", "plugin", "slow"))
	}
	if d := value(first.mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow"); d < 2.5 {
		t.Errorf("the first scrape reports %v s for the slow plugin's 3 s Collect", d)
	}
	// Both asked the fast plugin once, together.
	if a, b := value(first.mfs, "chaos_collects_total", "plugin", "fast"), value(hurried.mfs, "chaos_collects_total", "plugin", "fast"); a != b {
		t.Errorf("the overlapping scrapes did not share the fast plugin's Collect (#%v and #%v)", a, b)
	}
}

// A scrape that joins a Collect under way reports what it waited for it,
// not the Collect's whole duration.
func TestScrapeDurationIsWhatThisScrapeWaited(t *testing.T) {
	h := startHost(t, []string{"slow"}, "  slow: {config: {series: 1, sleep: 2s}, timeout: 10s}\n")
	first := make(chan timedScrape, 1)
	go func() { first <- h.scrapeWithTimeout("") }()
	time.Sleep(1500 * time.Millisecond)
	late := h.scrapeWithTimeout("")
	if late.err != nil {
		t.Fatal(late.err)
	}
	early := <-first
	if early.err != nil {
		t.Fatal(early.err)
	}
	if a, b := value(early.mfs, "chaos_collects_total", "plugin", "slow"), value(late.mfs, "chaos_collects_total", "plugin", "slow"); a != b {
		t.Fatalf("the late scrape did not join the first one's Collect (#%v and #%v)", a, b)
	}
	d := value(late.mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow")
	t.Logf("the late scrape took %v and reports %v s; the first took %v", late.took, d, early.took)
	if value(late.mfs, "plexporter_plugin_scrape_success", "plugin", "slow") != 1 || d < 0 || d > late.took.Seconds() {
		t.Errorf("the late scrape took %v but reports %v s for the plugin (success %v)", late.took, d, value(late.mfs, "plexporter_plugin_scrape_success", "plugin", "slow"))
	}
	if d := value(early.mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow"); d < 1.9 || d > early.took.Seconds() {
		t.Errorf("the first scrape reports %v s for a 2 s Collect (took %v)", d, early.took)
	}
}

// The symptom as Prometheus sees it: a real Prometheus (1 s timeout)
// scrapes a host with a hung plugin while another client scrapes it
// without a timeout, all the time. Every one of Prometheus's scrapes must
// succeed.
func TestRealPrometheusBesideAPatientScraperStaysUp(t *testing.T) {
	bin := prometheusBinary(t)
	h := startHost(t, []string{"fast", "hung"}, `
  fast: {config: {series: 2}}
  hung: {config: {series: 1, sleep: 1h, ignore_deadline: true}, timeout: 4s}
`)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.scrapeWithTimeout("") // up to the hung plugin's 4 s
		}
	})
	defer func() { close(stop); wg.Wait() }()

	promURL := startPrometheus(t, bin, h.url, "1s")
	h.waitFor(30*time.Second, "Prometheus's first scrape", func() bool {
		return query(t, promURL, `up{job="plexporter"}`, "job")["plexporter"] != ""
	})
	time.Sleep(12 * time.Second)
	scrapes, _ := strconv.Atoi(query(t, promURL, `count_over_time(up{job="plexporter"}[1m])`, "job")["plexporter"])
	ups, _ := strconv.Atoi(query(t, promURL, `sum_over_time(up{job="plexporter"}[1m])`, "job")["plexporter"])
	t.Logf("Prometheus: %d of %d scrapes up", ups, scrapes)
	if scrapes < 8 || ups != scrapes {
		t.Errorf("Prometheus saw %d of %d scrapes up; every one must be (the hung plugin costs its own series only)", ups, scrapes)
	}
	if n := query(t, promURL, `count(chaos_value{plugin="fast"})`, "")[""]; n != "2" {
		t.Errorf("the fast plugin's series in Prometheus: %q, want 2", n)
	}
}

// An HA pair: two scrapes of the 100k-series plugin at the same moment,
// per op. They share one collect and one merge; each encodes its own
// response. Run: go test ./host -run XXX -bench HAPair -benchtime 10x
func BenchmarkHAPairScrape100k(b *testing.B) {
	h := startBenchHost(b)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func() {
		req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()
	pids := append([]int{h.cmd.Process.Pid}, childPIDs(h.cmd.Process.Pid)...)
	before := cpuTicks(pids...)
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Go(get)
		wg.Go(get)
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric((cpuTicks(pids...)-before)*10/float64(b.N), "cpu-ms/op")
	_, mfs := h.scrape("")
	b.ReportMetric(value(mfs, "chaos_collects_total", "plugin", "bench")/float64(b.N+2), "collects/op")
}

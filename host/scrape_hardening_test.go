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

// slowSleep is how long the slow plugin of the tests below takes to
// answer: the scrapes they compare with it take well under a second on a
// quiet machine, and no load stretches them to this.
const slowSleep = 30 * time.Second

// A scrape with a 1 s Prometheus timeout that arrives while a scrape
// without one waits for a slow plugin leaves by its own deadline, with the
// fast plugin's series and the slow one marked failed; the first scrape
// still gets the slow plugin's series when it answers.
func TestJoiningScrapeLeavesByItsOwnDeadline(t *testing.T) {
	t.Parallel() // it mostly waits
	h := startHost(t, []string{"fast", "slow"}, fmt.Sprintf(`
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: %v}, timeout: %v}
`, slowSleep, 2*slowSleep))
	patient := make(chan timedScrape, 1)
	go func() { patient <- h.scrapeWithTimeout("") }()
	time.Sleep(300 * time.Millisecond) // the first scrape's round is under way

	hurried := h.scrapeWithTimeout("1")
	if hurried.err != nil {
		t.Fatal(hurried.err)
	}
	t.Logf("the scrape with a 1 s timeout that joined took %v", hurried.took)
	// It left before the slow plugin answered (the patient scrape still
	// waits for it), not after a wall-clock bound this machine may miss.
	select {
	case first := <-patient:
		t.Fatalf("the joining scrape (1 s Prometheus timeout) took %v and ended after the slow plugin answered the patient scrape (%v)", hurried.took, first.took)
	default:
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
	if first.took < slowSleep || value(first.mfs, "plexporter_plugin_scrape_success", "plugin", "slow") != 1 || count(first.mfs, "chaos_value", "plugin", "slow") != 1 {
		t.Errorf("the scrape without a timeout must wait for the slow plugin (took %v, success %v)", first.took, value(first.mfs, "plexporter_plugin_scrape_success", "plugin", "slow"))
	}
	if d := value(first.mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow"); d < slowSleep.Seconds()-0.1 {
		t.Errorf("the first scrape reports %v s for the slow plugin's %v Collect", d, slowSleep)
	}
	// Both asked the fast plugin once, together.
	if a, b := value(first.mfs, "chaos_collects_total", "plugin", "fast"), value(hurried.mfs, "chaos_collects_total", "plugin", "fast"); a != b {
		t.Errorf("the overlapping scrapes did not share the fast plugin's Collect (#%v and #%v)", a, b)
	}
}

// A scrape that joins a Collect under way reports what it waited for it,
// not the Collect's whole duration.
func TestScrapeDurationIsWhatThisScrapeWaited(t *testing.T) {
	t.Parallel() // it mostly waits
	h := startHost(t, []string{"slow"}, fmt.Sprintf("  slow: {config: {series: 1, sleep: %v}, timeout: %v}\n", slowSleep, 2*slowSleep))
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
	if d := value(early.mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow"); d < slowSleep.Seconds()-0.1 || d > early.took.Seconds() {
		t.Errorf("the first scrape reports %v s for a %v Collect (took %v)", d, slowSleep, early.took)
	}
}

// The symptom as Prometheus sees it: a real Prometheus (2 s timeout)
// scrapes a host with a hung plugin while another client scrapes it
// without a timeout, all the time. Every one of Prometheus's scrapes must
// succeed: the patient client's collect waits up to the hung plugin's 4 s,
// Prometheus's must end at its own 1.5 s (its timeout less the host's
// margin). 2 s rather than 1 s leaves the fast plugin three times the time
// to answer on a loaded machine, and is still far below the hung plugin's.
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

	promURL := startPrometheusEvery(t, bin, h.url, "2s", "2s")
	// A dozen scrapes (the test counts them rather than its own clock: a
	// loaded Prometheus may skip some ticks), then every number at the
	// instant of the last one ingested.
	const want = 12
	h.waitFor(2*minWait, fmt.Sprintf("%d scrapes by Prometheus", want), func() bool {
		n, _ := strconv.Atoi(query(t, promURL, `count_over_time(up{job="plexporter"}[1h])`, "job")["plexporter"])
		return n >= want
	})
	at := settledInstant(t, h, promURL)
	scrapes, _ := strconv.Atoi(queryAt(t, promURL, at, `count_over_time(up{job="plexporter"}[1h])`, "job")["plexporter"])
	ups, _ := strconv.Atoi(queryAt(t, promURL, at, `sum_over_time(up{job="plexporter"}[1h])`, "job")["plexporter"])
	t.Logf("Prometheus: %d of %d scrapes up", ups, scrapes)
	if scrapes < want || ups != scrapes {
		t.Errorf("Prometheus saw %d of %d scrapes up; every one must be (the hung plugin costs its own series only)", ups, scrapes)
	}
	if n := queryAt(t, promURL, at, `count(chaos_value{plugin="fast"})`, "")[""]; n != "2" {
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

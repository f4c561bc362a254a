package main

// End-to-end tests: the real plexporter binary, real plugin processes over
// real gRPC, scraped over HTTP.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plexporter-e2e")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// Two go builds, run together, for every binary the tests run, so they
	// compile and link in parallel: the host and the test plugins, and the
	// shipped plugins. Each names its binaries after their package
	// directories (two builds, because the test plugin
	// internal/testkit/testplugins/probe and the shipped plugins/probe share the
	// base name); then each is moved to the name the tests use.
	builds := []map[string]string{
		{".": "plexporter", "../internal/testkit/testplugins/chaos": "chaos", "../internal/testkit/testplugins/probe": "probe", "../internal/testkit/testplugins/native": "native"},
		{},
	}
	shipped, _ := filepath.Glob("../plugins/*/main.go")
	for _, m := range shipped {
		name := filepath.Base(filepath.Dir(m))
		builds[1]["../plugins/"+name] = "shipped/plexporter-" + name
	}
	os.MkdirAll(filepath.Join(dir, "shipped"), 0o755)
	var cmds []*exec.Cmd
	for i, b := range builds {
		staging := filepath.Join(dir, fmt.Sprintf("staging%d", i))
		args := []string{"build", "-o", staging + "/"}
		for pkg := range b {
			args = append(args, pkg)
		}
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as `make build` does
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			panic("go " + strings.Join(args, " ") + ": " + err.Error())
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			panic(strings.Join(cmd.Args, " ") + ": " + err.Error())
		}
		staging := filepath.Join(dir, fmt.Sprintf("staging%d", i))
		for pkg, out := range builds[i] {
			built := filepath.Base(pkg)
			if pkg == "." {
				built = "host"
			}
			if err := os.Rename(filepath.Join(staging, built), filepath.Join(dir, out)); err != nil {
				panic(err)
			}
		}
		os.Remove(staging)
	}
	// What the probe plugin looks for in its environment: the sandbox
	// passes the manifest's env names only (PROBE_ALLOWED) and withholds the
	// rest (PROBE_SECRET). Set once for the whole process, not per test, so
	// tests that start sandboxed hosts can run in parallel.
	os.Setenv("PROBE_ALLOWED", "1")
	os.Setenv("PROBE_SECRET", "1")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type host struct {
	t       testing.TB
	cmd     *exec.Cmd
	url     string
	dir     string // plugin directory
	cfgPath string
	logs    *bytes.Buffer
}

// install puts the chaos plugin into the plugin dir as plexporter-<name>.
func (h *host) install(name string) {
	h.t.Helper()
	if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(h.dir, "plexporter-"+name)); err != nil {
		h.t.Fatal(err)
	}
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startHost runs plexporter with the given chaos plugins and config (YAML
// text of the plugins: section) and waits for /ready.
func startHost(t testing.TB, plugins []string, pluginsYAML string, extraArgs ...string) *host {
	t.Helper()
	dir := t.TempDir()
	for _, p := range plugins {
		if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-"+p)); err != nil {
			t.Fatal(err)
		}
	}
	return startHostIn(t, dir, pluginsYAML, extraArgs...)
}

// startHostIn runs plexporter on an existing plugin directory.
func startHostIn(t testing.TB, dir, pluginsYAML string, extraArgs ...string) *host {
	t.Helper()
	return startHostBinary(t, filepath.Join(binDir, "plexporter"), dir, pluginsYAML, extraArgs...)
}

// startHostBinary is startHostIn with another build of the host (a test
// build with a protection off).
func startHostBinary(t testing.TB, binary, dir, pluginsYAML string, extraArgs ...string) *host {
	t.Helper()
	h := &host{t: t, dir: dir, logs: &bytes.Buffer{}}
	h.cfgPath = filepath.Join(t.TempDir(), "plexporter.yml")
	h.writeConfig(pluginsYAML)
	addr := freePort(t)
	h.url = "http://" + addr
	args := []string{"--plugin.dir=" + h.dir, "--config.file=" + h.cfgPath, "--web.listen-address=" + addr, "--log.level=debug"}
	if !slices.Contains(extraArgs, "--plugin.sandbox") && !slices.Contains(extraArgs, "--no-plugin.sandbox") {
		// These tests are about the host, not confinement (sandbox_test.go
		// is): the chaos plugin writes pid files into private temp dirs.
		args = append(args, "--no-plugin.sandbox")
	}
	args = append(args, extraArgs...)
	h.cmd = exec.Command(binary, args...)
	h.cmd.Stdout, h.cmd.Stderr = h.logs, h.logs
	h.cmd.Env = os.Environ()
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.cmd.Process.Signal(syscall.SIGTERM)
		h.cmd.Wait()
		if t.Failed() {
			t.Logf("host log:\n%s", h.logs.String())
		}
	})
	h.waitFor(10*time.Second, "ready", func() bool {
		resp, err := http.Get(h.url + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return h
}

func (h *host) writeConfig(pluginsYAML string) {
	h.t.Helper()
	body := "plugins:\n" + pluginsYAML
	if strings.TrimSpace(pluginsYAML) == "" {
		body = ""
	}
	if err := os.WriteFile(h.cfgPath, []byte(body), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// minWait is the shortest deadline waitFor gives a condition: a deadline
// only matters when the test fails, and on a machine loaded by other tests
// work that takes well under a second when quiet can take many times
// longer. A shorter d is raised to it, so that no test fails for the
// machine's speed; what the test waits for still has to happen.
const minWait = 60 * time.Second

// waitFor polls ok until it holds, failing the test after d or minWait,
// whichever is longer.
func (h *host) waitFor(d time.Duration, what string, ok func() bool) {
	h.t.Helper()
	d = max(d, minWait)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("timed out after %v waiting for %s", d, what)
}

// scrape fetches /metrics as text and parses it.
func (h *host) scrape(query string) (string, map[string]*dto.MetricFamily) {
	h.t.Helper()
	resp, err := http.Get(h.url + "/metrics" + query)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		h.t.Fatalf("scrape status %d: %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		h.t.Fatalf("parse scrape: %v", err)
	}
	return string(body), mfs
}

// value returns the value of the series of family with the given labels, or -1.
func value(mfs map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	for _, m := range mfs[family].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Untyped != nil:
				return m.GetUntyped().GetValue()
			}
		}
	}
	return -1
}

func count(mfs map[string]*dto.MetricFamily, family, label, val string) int {
	n := 0
	for _, m := range mfs[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == val {
				n++
			}
		}
	}
	return n
}

func readPIDs(t *testing.T, path string) (int, int) {
	t.Helper()
	var pid, child int
	deadline := time.Now().Add(minWait)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if _, err := fmt.Sscan(string(b), &pid, &child); err == nil {
				return pid, child
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid file %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	// A zombie still answers kill 0; read its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

func TestMergedScrapeAndPromtool(t *testing.T) {
	h := startHost(t, []string{"alpha", "beta"}, `
  alpha: {config: {series: 3, histograms: 2, shared_family: true}}
  beta:  {config: {series: 2, shared_family: true}, metric_prefix: "pre_"}
`)
	text, mfs := h.scrape("")
	if count(mfs, "chaos_value", "plugin", "alpha") != 3 || count(mfs, "pre_chaos_value", "plugin", "beta") != 2 {
		t.Fatalf("plugin series missing:\n%s", text)
	}
	if len(mfs["chaos_value_seconds"].GetMetric()) != 2 {
		t.Fatal("histograms missing")
	}
	// one family, shared by both plugins with identical metadata
	if count(mfs, "chaos_shared", "plugin", "alpha") != 1 || count(mfs, "chaos_shared", "plugin", "beta") != 0 {
		// beta's prefix makes its family pre_chaos_shared
		t.Fatalf("shared family wrong:\n%s", text)
	}
	for _, p := range []string{"alpha", "beta"} {
		if value(mfs, "plexporter_plugin_up", "plugin", p) != 1 || value(mfs, "plexporter_plugin_scrape_success", "plugin", p) != 1 {
			t.Fatalf("self-metrics for %s wrong:\n%s", p, text)
		}
	}
	if value(mfs, "plexporter_plugin_series", "plugin", "alpha") != 3+2*13+1+1 { // values, histograms, shared, collects
		t.Fatalf("alpha series = %v", value(mfs, "plexporter_plugin_series", "plugin", "alpha"))
	}
	if _, ok := mfs["plexporter_build_info"]; !ok {
		t.Fatal("no build info")
	}
	sdktest.Promtool(t, text)

	// collect[] and exclude[]
	_, only := h.scrape("?collect[]=alpha")
	if count(only, "pre_chaos_value", "plugin", "beta") != 0 || count(only, "chaos_value", "plugin", "alpha") != 3 {
		t.Fatal("collect[] not applied")
	}
	_, excl := h.scrape("?exclude[]=alpha")
	if count(excl, "chaos_value", "plugin", "alpha") != 0 || count(excl, "pre_chaos_value", "plugin", "beta") != 2 {
		t.Fatal("exclude[] not applied")
	}
}

func TestFormatsAndGzip(t *testing.T) {
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 5}}\n")
	for accept, want := range map[string]string{
		"application/openmetrics-text;version=1.0.0": "application/openmetrics-text",
		"text/plain;version=0.0.4":                   "text/plain",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited": "application/vnd.google.protobuf",
	} {
		req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Encoding", "gzip")
		tr := &http.Transport{DisableCompression: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, want) || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Accept %s: Content-Type %q Content-Encoding %q", accept, ct, resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		resp.Body.Close()
		if err != nil || len(body) == 0 {
			t.Fatalf("gzip body: %v", err)
		}
		if strings.HasPrefix(want, "application/openmetrics") && !bytes.HasSuffix(body, []byte("# EOF\n")) {
			t.Fatal("OpenMetrics body without # EOF")
		}
	}
}

func TestGarbagePluginIsGuarded(t *testing.T) {
	h := startHost(t, []string{"good", "junk"}, `
  good: {config: {series: 2, shared_family: true}}
  junk: {config: {series: 2, duplicates: 2, invalid_names: true, type_conflict: true, huge_labels: true}}
`)
	text, mfs := h.scrape("")
	if count(mfs, "chaos_value", "plugin", "good") != 2 || count(mfs, "chaos_value", "plugin", "junk") != 2 {
		t.Fatalf("good series lost:\n%s", text)
	}
	for reason, want := range map[string]float64{"duplicate": 2, "invalid_name": 2, "conflict": 1, "invalid_label_value": 1} {
		if got := value(mfs, "plexporter_dropped_series_total", "plugin", "junk", "reason", reason); got != want {
			t.Errorf("dropped{junk,%s} = %v, want %v", reason, got, want)
		}
	}
	if strings.Contains(text, "chaos-bad-name") || strings.Contains(text, "xxxxxxxxxxxxxxxx") {
		t.Fatal("garbage reached the exposition")
	}
	sdktest.Promtool(t, text)
	if !strings.Contains(h.logs.String(), "dropping series") {
		t.Fatal("drops not logged")
	}
}

func TestNonPluginExecutableIsContained(t *testing.T) {
	h := startHost(t, []string{"good"}, "  good: {config: {series: 1}}\n")
	script := "#!/bin/sh\necho 'not a plugin handshake'\nexit 0\n"
	if err := os.WriteFile(filepath.Join(h.dir, "plexporter-impostor"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h.waitFor(5*time.Second, "impostor tried and failed", func() bool {
		return strings.Contains(h.logs.String(), `plugin=impostor`) && strings.Contains(h.logs.String(), "plugin down; restarting")
	})
	_, mfs := h.scrape("")
	if up, good := value(mfs, "plexporter_plugin_up", "plugin", "impostor"), count(mfs, "chaos_value", "plugin", "good"); up != 0 || good != 1 {
		t.Fatalf("impostor up=%v, good plugin series=%d: a non-plugin executable must be down without affecting the others", up, good)
	}
}

func TestSeriesCap(t *testing.T) {
	// 50 gauges + the collect counter = 51 series; the cap keeps 20.
	h := startHost(t, []string{"big"}, "  big: {config: {series: 50}, max_series: 20}\n")
	_, mfs := h.scrape("")
	if n := value(mfs, "plexporter_plugin_series", "plugin", "big"); n != 20 {
		t.Fatalf("exposed %v series, want 20", n)
	}
	if n := count(mfs, "chaos_value", "plugin", "big") + count(mfs, "chaos_collects_total", "plugin", "big"); n != 20 {
		t.Fatalf("exposition has %d series of the plugin, want 20", n)
	}
	if got := value(mfs, "plexporter_dropped_series_total", "plugin", "big", "reason", "series_limit"); got != 31 {
		t.Fatalf("series_limit drops = %v", got)
	}
}

// A margin no load reaches for a bound that a quiet machine meets in a
// second: what a test bounds by it would otherwise take an hour.
const farBeyond = 30 * time.Second

func TestHungPluginDoesNotHoldTheScrape(t *testing.T) {
	t.Parallel() // it mostly waits
	h := startHost(t, []string{"fast", "hung"}, `
  fast: {config: {series: 1}}
  hung: {config: {series: 1, sleep: 1h, ignore_deadline: true}, timeout: 1s}
`)
	start := time.Now()
	_, mfs := h.scrape("")
	took := time.Since(start)
	t.Logf("scrape with a hung plugin took %v (plugin timeout 1s)", took)
	if took > farBeyond {
		t.Fatalf("scrape took %v; the hung plugin's timeout is 1 s (it would answer in an hour)", took)
	}
	if count(mfs, "chaos_value", "plugin", "fast") != 1 || value(mfs, "plexporter_plugin_scrape_success", "plugin", "hung") != 0 {
		t.Fatal("fast plugin lost or hung plugin not marked failed")
	}
}

func TestPrometheusScrapeTimeoutHeaderBoundsTheScrape(t *testing.T) {
	t.Parallel() // it mostly waits
	h := startHost(t, []string{"fast", "slow"}, `
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: 1h}, timeout: 1h}
`)
	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "1.5")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("scrape with a 1.5 s Prometheus timeout took %v", took)
	if took > farBeyond {
		t.Fatalf("scrape took %v: the 1.5 s Prometheus timeout did not end it (the slow plugin answers in an hour)", took)
	}
	if !strings.Contains(string(body), `chaos_value{plugin="fast",i="0"} 0`) || !strings.Contains(string(body), `plexporter_plugin_scrape_success{plugin="slow"} 0`) {
		t.Fatalf("want the fast plugin's series and the slow one marked failed:\n%s", body)
	}
	// The host waited for the slow plugin until its own deadline, 0.5 s
	// before Prometheus's: a lower bound, which no load can break.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if d := value(mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "slow"); d < 0.95 || d > took.Seconds() {
		t.Errorf("the scrape reports %v s for the slow plugin; it must have waited until 1 s (1.5 s less the 0.5 s margin), and at most the %v it took", d, took)
	}
}

func TestHungPluginIsRestarted(t *testing.T) {
	h := startHost(t, []string{"stuck"}, "  stuck: {config: {series: 1, sleep: 1h, ignore_deadline: true}, timeout: 200ms}\n")
	for range 3 {
		if _, mfs := h.scrape(""); value(mfs, "plexporter_plugin_scrape_success", "plugin", "stuck") != 0 {
			t.Fatal("a stuck plugin cannot succeed")
		}
	}
	h.waitFor(5*time.Second, "the stuck plugin restarted", func() bool {
		_, mfs := h.scrape("?exclude[]=stuck")
		return value(mfs, "plexporter_plugin_restarts_total", "plugin", "stuck") >= 1
	})
	if !strings.Contains(h.logs.String(), "timed out on consecutive collects") {
		t.Fatal("the restart's reason is not logged")
	}
}

func TestPanicAndExitMidStream(t *testing.T) {
	h := startHost(t, []string{"fine", "panicky", "quitter"}, `
  fine: {config: {series: 1}}
  panicky: {config: {panic: true}}
  quitter: {config: {series: 9000, exit_mid_stream: true}}
`)
	text, mfs := h.scrape("")
	if count(mfs, "chaos_value", "plugin", "fine") != 1 {
		t.Fatalf("fine plugin lost:\n%s", text)
	}
	if value(mfs, "plexporter_plugin_collect_errors_total", "plugin", "panicky", "collector", "panic") != 1 {
		t.Fatalf("panic not counted:\n%s", text)
	}
	// the panicking plugin stays up; the quitter's process is gone
	_, mfs = h.scrape("")
	if value(mfs, "plexporter_plugin_up", "plugin", "panicky") != 1 {
		t.Fatal("plugin went down after a panic")
	}
	if value(mfs, "plexporter_plugin_scrape_success", "plugin", "quitter") != 0 {
		t.Fatal("exit mid-stream not reported as failure")
	}
}

func TestConcurrentScrapesShareOneCollect(t *testing.T) {
	t.Parallel() // it mostly waits
	// One duplicate per collect: the drop counter tells how many merges ran.
	// The first Collect lasts 30 s, however late a loaded machine starts
	// the scrapers, which must all join it; the next one, once held is
	// removed, answers at once.
	held := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(held, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, []string{"slow"}, fmt.Sprintf("  slow: {config: {series: 1, duplicates: 1, sleep: 30s, sleep_while: %q}, timeout: 1m}\n", held))
	const scrapers = 16
	type seen struct{ collect, dropped float64 }
	done := make(chan seen, scrapers)
	for range scrapers {
		go func() {
			_, mfs := h.scrape("")
			done <- seen{value(mfs, "chaos_collects_total", "plugin", "slow"), value(mfs, "plexporter_dropped_series_total", "plugin", "slow", "reason", "duplicate")}
		}()
	}
	for range scrapers {
		if v := <-done; v.collect != 1 || v.dropped != 1 {
			t.Errorf("a concurrent scrape saw collect #%v and %v drops, want all to share collect #1 and one merge", v.collect, v.dropped)
		}
	}
	os.Remove(held)
	_, mfs := h.scrape("")
	if value(mfs, "chaos_collects_total", "plugin", "slow") != 2 || value(mfs, "plexporter_dropped_series_total", "plugin", "slow", "reason", "duplicate") != 2 {
		t.Fatal("the next scrape must start a new collect and merge")
	}
}

// Concurrent scrapes of different selections are not shared, and each must
// report its own plugins' duration, success and series: never the values of
// a scrape of other plugins that ran at the same moment.
func TestConcurrentSelectionsSeeTheirOwnSelfMetrics(t *testing.T) {
	h := startHost(t, []string{"alpha", "beta"}, `
  alpha: {config: {series: 3}}
  beta:  {config: {series: 5}}
`)
	own := map[string]float64{"alpha": 3 + 1, "beta": 5 + 1} // values + the collect counter
	const workers = 8
	deadline := time.Now().Add(3 * time.Second)
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var bad error
			for i := 0; time.Now().Before(deadline) && bad == nil; i++ {
				self, other := "alpha", "beta"
				if (w+i)%2 == 1 {
					self, other = other, self
				}
				resp, err := http.Get(h.url + "/metrics?collect[]=" + self)
				if err != nil {
					bad = err
					break
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				parser := expfmt.NewTextParser(model.LegacyValidation)
				mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
				if err != nil {
					bad = err
					break
				}
				switch {
				case value(mfs, "plexporter_plugin_series", "plugin", self) != own[self]:
					bad = fmt.Errorf("scrape of %s reports plexporter_plugin_series{plugin=%q} = %v, want %v", self, self, value(mfs, "plexporter_plugin_series", "plugin", self), own[self])
				case value(mfs, "plexporter_plugin_scrape_success", "plugin", self) != 1:
					bad = fmt.Errorf("scrape of %s has no plexporter_plugin_scrape_success{plugin=%q} 1", self, self)
				case count(mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", self) != 1:
					bad = fmt.Errorf("scrape of %s has no scrape duration for %s", self, self)
				case count(mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", other)+count(mfs, "plexporter_plugin_series", "plugin", other)+count(mfs, "plexporter_plugin_scrape_success", "plugin", other) != 0:
					bad = fmt.Errorf("scrape of %s reports per-scrape values of %s, which it did not collect", self, other)
				}
			}
			errs <- bad
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestKill9PluginMidScrape(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "victim.pid")
	h := startHost(t, []string{"other", "victim"}, fmt.Sprintf(`
  other: {config: {series: 2}}
  victim: {config: {series: 2, sleep: 1h, pid_file: %q}, timeout: 1h}
`, pidFile))
	pid, _ := readPIDs(t, pidFile)
	// The victim's Collect never ends by itself, so that the kill lands
	// mid-Collect however late this goroutine runs.
	go func() {
		time.Sleep(300 * time.Millisecond)
		syscall.Kill(pid, syscall.SIGKILL)
	}()
	text, mfs := h.scrape("")
	if count(mfs, "chaos_value", "plugin", "other") != 2 || count(mfs, "chaos_value", "plugin", "victim") != 0 {
		t.Fatalf("scrape during kill:\n%s", text)
	}
	if value(mfs, "plexporter_plugin_scrape_success", "plugin", "victim") != 0 {
		t.Fatal("victim not marked failed")
	}
	// The scrape ends when the victim's stream breaks; the supervisor sees
	// the process exit a few milliseconds later (its wait returns), logs
	// it, and restarts it after the 1 s back-off: up is 0 in between (when
	// a poll lands in that second: on a loaded machine it may not).
	sawDown := h.waitForRestart("victim", 1, nil)
	t.Logf("the down state seen: %v", sawDown)
	if n := len(linesWith(h.logs.String(), `msg="plugin down; restarting" plugin=victim`)); n != 1 {
		t.Fatalf("the victim's crash logged %d times, want once", n)
	}
}

// waitForRestart polls (with ?exclude[]=plugin, so that the polls need not
// wait for it) until plugin is up again with restarts restarts, and says
// whether some poll saw it down in between; down, if not nil, is given that
// scrape's families and the time it ended.
func (h *host) waitForRestart(plugin string, restarts int, down func(mfs map[string]*dto.MetricFamily, scraped time.Time)) bool {
	h.t.Helper()
	saw := false
	h.waitFor(minWait, fmt.Sprintf("%s back after restart %d", plugin, restarts), func() bool {
		_, mfs := h.scrape("?exclude[]=" + plugin)
		scraped := time.Now()
		up, n := value(mfs, "plexporter_plugin_up", "plugin", plugin), value(mfs, "plexporter_plugin_restarts_total", "plugin", plugin)
		if up == 0 && n == float64(restarts-1) && !saw {
			saw = true
			if down != nil {
				down(mfs, scraped)
			}
		}
		return up == 1 && n == float64(restarts)
	})
	return saw
}

func TestHotAddRemoveReplace(t *testing.T) {
	h := startHost(t, []string{"first"}, "")
	has := func(name string) bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_plugin_up", "plugin", name) == 1
	}
	h.install("second")
	h.waitFor(5*time.Second, "second plugin started", func() bool { return has("second") })

	os.Remove(filepath.Join(h.dir, "plexporter-first"))
	h.waitFor(5*time.Second, "first plugin stopped", func() bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_plugin_up", "plugin", "first") == -1
	})

	// replace second's binary with a copy: new identity, so it restarts
	before := pluginSHA256(t, h, "second")
	data, _ := os.ReadFile(filepath.Join(binDir, "chaos"))
	tmp := filepath.Join(h.dir, ".new")
	os.WriteFile(tmp, append(data, 0), 0o755) // one byte more: another sha256
	os.Rename(tmp, filepath.Join(h.dir, "plexporter-second"))
	h.waitFor(5*time.Second, "second restarted", func() bool {
		return has("second") && pluginSHA256(t, h, "second") != before
	})

	// SIGHUP rereads the config file: a config change restarts the plugin
	h.writeConfig("  second: {config: {series: 4}}\n")
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitFor(5*time.Second, "second reconfigured", func() bool {
		_, mfs := h.scrape("")
		return count(mfs, "chaos_value", "plugin", "second") == 4
	})
}

// pluginSHA256 identifies a plugin build by the sha256 label of plexporter_plugin_info.
func pluginSHA256(t *testing.T, h *host, name string) string {
	_, mfs := h.scrape("")
	for _, m := range mfs["plexporter_plugin_info"].GetMetric() {
		var plugin, sum string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "plugin":
				plugin = l.GetValue()
			case "sha256":
				sum = l.GetValue()
			}
		}
		if plugin == name {
			return sum
		}
	}
	return ""
}

func TestStoppedPluginIsClosedAndItsChildrenKilled(t *testing.T) {
	dir := t.TempDir()
	pidFile, closeFile := filepath.Join(dir, "p.pid"), filepath.Join(dir, "closed")
	h := startHost(t, []string{"stopme"}, fmt.Sprintf("  stopme: {config: {spawn_child: true, pid_file: %q, close_file: %q}}\n", pidFile, closeFile))
	pid, child := readPIDs(t, pidFile)
	os.Remove(filepath.Join(h.dir, "plexporter-stopme"))
	h.waitFor(5*time.Second, "plugin and child gone", func() bool { return !alive(pid) && !alive(child) })
	if b, err := os.ReadFile(closeFile); err != nil || string(b) != "closed\n" {
		t.Fatalf("Close was not called on a graceful stop: %v", err)
	}
}

func TestHostSIGKILLLeavesNoProcessBehind(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "p.pid")
	h := startHost(t, []string{"parent"}, fmt.Sprintf("  parent: {config: {spawn_child: true, pid_file: %q}}\n", pidFile))
	pid, child := readPIDs(t, pidFile)
	if !alive(pid) || !alive(child) {
		t.Fatal("plugin or its child not running")
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
	deadline := time.Now().Add(minWait)
	for time.Now().Before(deadline) && (alive(pid) || alive(child)) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) || alive(child) {
		for _, p := range []int{pid, child} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
			t.Logf("pid %d status:\n%s", p, b)
		}
		t.Fatal("plugin or its child survived the host")
	}
}

func TestAllowlistFromEnvironment(t *testing.T) {
	t.Setenv("PLEXPORTER_ENABLED_METRICS", "chaos_value_seconds,plexporter_plugin_up,nomatch_*")
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 2, histograms: 1}}\n")
	_, mfs := h.scrape("")
	if _, ok := mfs["chaos_value"]; ok {
		t.Fatal("chaos_value is not enabled")
	}
	if len(mfs["chaos_value_seconds"].GetMetric()) != 1 || len(mfs["plexporter_plugin_up"].GetMetric()) != 1 {
		t.Fatalf("families = %v", keys(mfs))
	}
	for name := range mfs { // the allowlist never hides plexporter_* (papercuts_test.go)
		if name != "chaos_value_seconds" && !strings.HasPrefix(name, "plexporter_") {
			t.Fatalf("families = %v", keys(mfs))
		}
	}
	h.waitFor(3*time.Second, "unmatched warning", func() bool {
		return strings.Contains(h.logs.String(), "nomatch_*")
	})
}

func keys(m map[string]*dto.MetricFamily) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConfigErrorsAreClear(t *testing.T) {
	run := func(env []string, args ...string) string {
		cmd := exec.Command(filepath.Join(binDir, "plexporter"), args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%v %v: want failure, got:\n%s", env, args, out)
		}
		return string(out)
	}
	if out := run([]string{"PLEXPORTER_WEB_SYSTEMD_SOCKET=maybe"}, "--plugin.dir=/nonexistent"); !strings.Contains(out, "PLEXPORTER_WEB_SYSTEMD_SOCKET") {
		t.Errorf("bad boolean env: %s", out)
	}
	cfg := filepath.Join(t.TempDir(), "c.yml")
	os.WriteFile(cfg, []byte("plugins:\n  x:\n    timout: 1s\n"), 0o644)
	if out := run(nil, "--plugin.dir=/nonexistent", "--config.file="+cfg, "--web.listen-address=127.0.0.1:0"); !strings.Contains(out, "c.yml:3") || !strings.Contains(out, "timout") {
		t.Errorf("bad config file: %s", out)
	}
	if out := run([]string{"PLEXPORTER_ENABLED_METRICS=a[b"}, "--plugin.dir=/nonexistent"); !strings.Contains(out, "a[b") {
		t.Errorf("bad pattern: %s", out)
	}
}

func TestBooleanEnvWords(t *testing.T) {
	for _, v := range []string{"yes", "ON", "enable", "1", "No", "off", "DISABLE", "0"} {
		cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+t.TempDir(), "metrics")
		cmd.Env = append(os.Environ(), "PLEXPORTER_WEB_SYSTEMD_SOCKET="+v)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", v, err, out)
		}
	}
}

func TestPluginsAndMetricsCommands(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-alpha"))
	os.WriteFile(filepath.Join(dir, "plexporter-broken.yaml"), []byte("capabilties: []\n"), 0o644)
	os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-broken"))
	out, err := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+dir, "--no-plugin.sandbox", "plugins").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	var alpha, broken string
	for sc.Scan() {
		switch f := strings.Fields(sc.Text()); {
		case len(f) > 0 && f[0] == "alpha":
			alpha = sc.Text()
		case len(f) > 0 && f[0] == "broken":
			broken = sc.Text()
		}
	}
	if !strings.Contains(alpha, "0.0.1-test") || !strings.Contains(alpha, "running") {
		t.Errorf("alpha line: %q\n%s", alpha, out)
	}
	if !strings.Contains(broken, "refused") || !strings.Contains(broken, `unknown key "capabilties"`) {
		t.Errorf("broken line: %q\n%s", broken, out)
	}
	out, err = exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+dir, "--no-plugin.sandbox", "metrics", "--markdown").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "| alpha | `chaos_shared` | gauge | plugin |") {
		t.Fatalf("metrics --markdown: %v\n%s", err, out)
	}
}

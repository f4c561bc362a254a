// Command bench measures plexporter side by side with the exporters it
// replaces and writes its report between the markers of docs/performance.md
// (splice.go: the file's hand-written sections are kept). Run it with `make bench` (which
// builds the host, the shipped plugins, the chaos plugin and the harness's
// bench plugin first) or `go run ./internal/dev/bench` after them.
//
// Scenarios (issue 6):
//
//  1. exposition cost for 1k/10k/100k series: (A) client_golang + promhttp in
//     process, (B) host + 1 plugin, (C) host + 6 plugins sharing the series;
//     text, text+gzip, OpenMetrics, protobuf
//  2. plexporter-rdma vs node_exporter --collector.infiniband (16 devices x 2 ports)
//  3. plexporter-nfs vs node_exporter --collector.mountstats (50 mounts x nconnect 8)
//     (2, 3 and 7 at the paces of -paces: back to back, one scrape per
//     second and one per 15 s by default; the timed paces of all three on
//     one schedule, -scrapes and -scrapes-slow rounds)
//  4. allowlist pushdown: 10% of the families vs all
//  5. cold start to /ready with every shipped plugin; RSS
//  6. 16 concurrent scrapers against 6 plugins: collects vs scrapes, errors
//  7. plexporter-ethtool vs node_exporter --collector.ethtool (64 veth netdevs
//     in a private network namespace)
//  8. plexporter-textfile vs node_exporter --collector.textfile (1,000 files
//     of 100 series; files unchanged and all rewritten between scrapes;
//     back-to-back, one scrape per second and one per 15 s)
//  9. push (remote write 1.0, 2.0, OTLP) of 100k series vs a scrape of them
//     (host + 1 plugin; issue 31)
//
// Every figure is the median of -runs runs; a run repeats scrapes for at
// least -min-run. CPU is each process's CPU clock (proctree.CPU: what
// /proc/<pid>/stat's utime+stime count, in ns rather than 10 ms ticks). Compared configurations are measured
// interleaved, run by run, so ratios come from the same minutes. Every
// process listens on 127.0.0.1 only; every loop is bounded in count and time.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type harness struct {
	root    string // repository root
	binDir  string
	hostBin string
	// -compare-bin: another build's directory (plexporter, bench/); scenario
	// 1 measures its B beside this build's, interleaved
	compareBin string
	formats    []format // -formats: scenario 1's formats
	work       string   // temp dir for configs, logs, profiles
	trees      string   // temp dir for the sysfs and procfs trees (tmpfs if possible)
	client     *http.Client

	runs      int
	minRun    time.Duration
	sizes     []int
	scenarios map[string]bool
	profile   string // "missed", "always", "never"
	micro     bool
	verbose   bool

	// the plexporter-vs-node_exporter comparisons (scenarios 2, 3, 7)
	paces       []pace // -paces
	scrapes     int    // rounds at a timed pace below slowPace
	scrapesSlow int    // rounds at a pace of slowPace or more
	pending     []*versusRun

	started time.Time
	report  *report

	// from scenario 1, for scenario 5
	hostRSS100k   float64
	hostHWM100k   int64
	text100kBytes int64
	// from scenario 2, for the profiles
	rdmaSys string
	// plexporter_plugin_sandboxed values seen after each host start, counted
	sandboxed map[string]int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "baseline" {
		os.Exit(runBaseline(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	h := &harness{started: time.Now(), report: &report{}, sandboxed: map[string]int{}}
	var (
		sizes, scen, out, paces, formats string
		keep                             bool
	)
	flag.StringVar(&h.binDir, "bin", "bin", "directory with plexporter, plugins/ (make build) and bench/ (chaos and bench plugins)")
	flag.IntVar(&h.runs, "runs", 5, "runs per measurement (the median is reported); at least 5 for the report")
	flag.DurationVar(&h.minRun, "min-run", 400*time.Millisecond, "minimum duration of one run (scrapes repeat until it has passed)")
	flag.StringVar(&sizes, "sizes", "1000,10000,100000", "series counts of scenario 1")
	flag.StringVar(&h.compareBin, "compare-bin", "", "scenario 1: also measure B (host + 1 bench plugin) built in this directory (plexporter, bench/plexporter-bench), interleaved with this build's in the same runs, and report the ratios run by run")
	flag.StringVar(&formats, "formats", "text,text+gzip,OpenMetrics,protobuf", "scenario 1's formats (comma-separated)")
	flag.StringVar(&scen, "scenarios", "1,2,3,4,5,6,7,8,9", "scenarios to run (comma-separated)")
	flag.StringVar(&paces, "paces", "0,1s,15s", "paces of the plexporter-vs-node_exporter scenarios (2, 3, 7): 0 is back to back, else one scrape of each exporter per duration; the slowest is the headline")
	flag.IntVar(&h.scrapes, "scrapes", 20, "rounds (one scrape of each exporter) at each timed pace under 10s")
	flag.IntVar(&h.scrapesSlow, "scrapes-slow", 8, "rounds at each pace of 10s or more (the 15 s pace: (N+1)×15 s, shared by scenarios 2, 3 and 7)")
	flag.StringVar(&out, "out", "docs/performance.md", "markdown file to write (empty: stdout only)")
	flag.StringVar(&h.profile, "profile", "missed", "CPU-profile the 100k scrape: missed (when a scenario 1 target is missed), always, never")
	flag.BoolVar(&h.micro, "micro", true, "run the Go micro-benchmarks of the hot paths")
	flag.BoolVar(&keep, "keep", false, "keep the work directory (logs, trees, profiles)")
	flag.BoolVar(&h.verbose, "v", false, "log progress details")
	revision := flag.String("revision", "", "label of the code measured (default: from git)")
	flag.Parse()

	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 100 {
			fmt.Fprintf(os.Stderr, "bench: bad -sizes entry %q\n", s)
			return 2
		}
		h.sizes = append(h.sizes, n)
	}
	for _, name := range strings.Split(formats, ",") {
		i := slices.IndexFunc(allFormats, func(f format) bool { return f.name == strings.TrimSpace(name) })
		if i < 0 {
			fmt.Fprintf(os.Stderr, "bench: unknown -formats entry %q\n", name)
			return 2
		}
		h.formats = append(h.formats, allFormats[i])
	}
	h.scenarios = map[string]bool{}
	for _, s := range strings.Split(scen, ",") {
		h.scenarios[strings.TrimSpace(s)] = true
	}
	var err error
	if h.paces, err = parsePaces(paces); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if h.scrapes < 1 || h.scrapes > 10000 || h.scrapesSlow < 1 || h.scrapesSlow > 1000 {
		fmt.Fprintln(os.Stderr, "bench: -scrapes must be in 1..10000, -scrapes-slow in 1..1000")
		return 2
	}
	if h.runs < 1 || h.runs > 100 {
		fmt.Fprintln(os.Stderr, "bench: -runs must be in 1..100")
		return 2
	}

	if h.root, err = findRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if !filepath.IsAbs(h.binDir) {
		h.binDir = filepath.Join(h.root, h.binDir)
	}
	h.hostBin = filepath.Join(h.binDir, "plexporter")
	if _, err := os.Stat(h.hostBin); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s missing: run `make bench` (or `make build` first)\n", h.hostBin)
		return 2
	}
	if h.work, err = os.MkdirTemp("", "bench-"); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	// Sandboxed plugins run as an unprivileged user: they must be able to
	// reach the trees and the profile directory below it.
	os.Chmod(h.work, 0o755)
	defer func() {
		if keep {
			h.logf("work directory kept: %s", h.work)
		} else {
			os.RemoveAll(h.work)
		}
	}()
	// The fixture trees go to tmpfs when there is one, like sysfs and procfs
	// live in memory.
	h.trees = h.work
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "bench-trees-"); err == nil {
			os.Chmod(d, 0o755)
			h.trees = d
			defer func() {
				if !keep {
					os.RemoveAll(d)
				}
			}()
		}
	}
	h.client = &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, DialContext: dialContext},
	}

	// Stop every process we started on Ctrl-C or SIGTERM.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "bench: interrupted; stopping processes")
		stopAll()
		os.Exit(130)
	}()
	defer stopAll()

	h.report.machine = describeMachine(h.root, *revision)
	h.report.runs, h.report.minRun = h.runs, h.minRun
	if h.runs < 5 {
		h.report.notes = append(h.report.notes, fmt.Sprintf("Only %d runs per measurement (-runs): fewer than the 5 the issue asks for.", h.runs))
	}
	h.logf("plexporter performance harness: %d runs of >= %v per figure; work dir %s", h.runs, h.minRun, h.work)

	// The plexporter-vs-node_exporter comparisons (versus) run one after
	// the other and keep their exporters until the next other scenario:
	// their timed paces are measured together (finishVersus). The report
	// orders the sections by id.
	steps := []struct {
		id     string
		name   string
		fn     func() error
		versus bool
	}{
		{"1", "exposition cost", h.scenarioExposition, false},
		{"2", "rdma vs node_exporter infiniband", h.scenarioRDMA, true},
		{"3", "nfs vs node_exporter mountstats", h.scenarioNFS, true},
		{"7", "ethtool vs node_exporter ethtool", h.scenarioEthtool, true},
		{"4", "allowlist pushdown", h.scenarioAllowlist, false},
		{"5", "cold start and memory", h.scenarioStartup, false},
		{"6", "concurrent scrapers", h.scenarioConcurrency, false},
		{"8", "textfile vs node_exporter textfile", h.scenarioTextfile, false},
		{"9", "push vs scrape", h.scenarioPush, false},
	}
	for _, s := range steps {
		if !h.scenarios[s.id] {
			continue
		}
		if !s.versus {
			h.finishVersus()
		}
		h.logf("scenario %s: %s", s.id, s.name)
		began := time.Now()
		if err := s.fn(); err != nil {
			h.logf("scenario %s failed: %v", s.id, err)
			h.report.fail(s.id, s.name, err)
		}
		if !s.versus {
			stopAll()
		}
		h.logf("scenario %s done in %v", s.id, time.Since(began).Round(100*time.Millisecond))
	}
	h.finishVersus()
	if h.micro {
		h.logf("micro-benchmarks")
		if err := h.microBenchmarks(); err != nil {
			h.logf("micro-benchmarks failed: %v", err)
			h.report.notes = append(h.report.notes, "Micro-benchmarks failed: "+err.Error())
		}
	}
	if h.profile == "always" || (h.profile == "missed" && (h.report.missed("1") || h.report.missed("2"))) {
		h.logf("profiling")
		if err := h.profiles(); err != nil {
			h.logf("profiling failed: %v", err)
			h.report.notes = append(h.report.notes, "Profiling failed: "+err.Error())
		}
	}
	switch {
	case h.sandboxed["1"] > 0 && h.sandboxed["0"] == 0:
		h.report.notes = append(h.report.notes, "Every plugin ran in its sandbox (`plexporter_plugin_sandboxed 1`: own uid, Landlock, rlimits), "+
			"as in production; the fixture trees were granted through manifest overrides in the host config. "+
			"The in-process profiles (`go test`) run plugins unconfined.")
	case h.sandboxed["0"] > 0:
		h.report.notes = append(h.report.notes, fmt.Sprintf("Plugins ran unconfined (`plexporter_plugin_sandboxed 0` in %d of %d plugin starts): "+
			"the harness was not run as root, or the sandbox was off.", h.sandboxed["0"], h.sandboxed["0"]+h.sandboxed["1"]))
	}
	h.report.elapsed = time.Since(h.started)

	md := h.report.markdown()
	fmt.Print(md)
	if out != "" {
		path := out
		if !filepath.IsAbs(path) {
			path = filepath.Join(h.root, path)
		}
		if err := writeReport(path, md); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		h.logf("wrote %s", path)
	}
	return 0
}

// logf writes progress to stderr (stdout carries the markdown).
func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(h.started).Seconds(), fmt.Sprintf(format, args...))
}

func (h *harness) debugf(format string, args ...any) {
	if h.verbose {
		h.logf(format, args...)
	}
}

// findRoot walks up from the working directory to the directory with go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 32 {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/plexporter/plexporter\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("run from inside the plexporter repository")
}

// median of xs (xs is not modified).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// get fetches url with the given Accept header (and gzip if asked) and
// returns the body size and content type. Non-200 is an error.
func (h *harness) get(url, accept string, gzip bool) (int64, string, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, "", err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, "", err
	}
	if resp.StatusCode != 200 {
		return n, "", fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	if gzip && resp.Header.Get("Content-Encoding") != "gzip" {
		return n, "", fmt.Errorf("GET %s: asked for gzip, got Content-Encoding %q", url, resp.Header.Get("Content-Encoding"))
	}
	return n, resp.Header.Get("Content-Type"), nil
}

// getBody fetches url as text 0.0.4, uncompressed.
func (h *harness) getBody(url string) ([]byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: status %d: %.200s", url, resp.StatusCode, b)
	}
	return b, nil
}

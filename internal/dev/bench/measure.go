package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/plexporter/plexporter/internal/dev/proctree"
)

var sandboxedLine = regexp.MustCompile(`(?m)^plexporter_plugin_sandboxed\{plugin="([^"]+)"\} (\S+)$`)

// exporter is something the harness scrapes: a plexporter host with its
// plugins, the client_golang baseline or node_exporter.
type exporter struct {
	*proc
	path    string // metrics path
	plugins []int  // plugin pids (hosts only)
}

// pids are the processes whose CPU counts for a scrape.
func (e *exporter) pids() []int { return append([]int{e.pid()}, e.plugins...) }

// rss returns VmRSS of the exporter's main process.
func (e *exporter) rss() float64 {
	v, _ := status(e.pid(), "VmRSS")
	return float64(v)
}

// alive checks that the exporter and its plugin processes are still the ones
// measured (a restarted plugin would have a new pid and lost CPU time).
func (e *exporter) alive() error {
	for _, pid := range e.pids() {
		if _, err := proctree.ReadStat(pid); err != nil {
			return fmt.Errorf("%s: process %d is gone (crash or restart?)\n%s", e.name, pid, e.logTail())
		}
	}
	return nil
}

type hostSpec struct {
	name    string
	plugins map[string]string // installed name -> executable
	config  string            // YAML of the plugins: section (indented by two spaces)
	args    []string
	env     []string
	netns   *benchNetns // run the host in this network namespace (nil: the harness's)
	bin     string      // the host executable (empty: h.hostBin)
}

// startHost installs the plugins as plexporter-<name> symlinks in a fresh
// plugin directory, starts the host on a free loopback port and waits for
// /ready and for every plugin process.
func (h *harness) startHost(spec hostSpec) (*exporter, error) {
	dir := filepath.Join(h.work, spec.name+"-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(spec.plugins))
	for name := range spec.plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.Symlink(spec.plugins[name], filepath.Join(dir, "plexporter-"+name)); err != nil {
			return nil, err
		}
		// The shipped manifest (make build puts it beside the plugin) goes
		// with it, so the plugin runs in its own sandbox, as in production,
		// not in the default one; the config's overrides add the trees.
		if manifest := spec.plugins[name] + ".yaml"; fileExists(manifest) {
			if err := os.Symlink(manifest, filepath.Join(dir, "plexporter-"+name+".yaml")); err != nil {
				return nil, err
			}
		}
	}
	cfg := filepath.Join(h.work, spec.name+".yml")
	body := ""
	if strings.TrimSpace(spec.config) != "" {
		body = "plugins:\n" + spec.config
	}
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	bin := h.hostBin
	if spec.bin != "" {
		bin = spec.bin
	}
	args := append([]string{"--plugin.dir=" + dir, "--config.file=" + cfg, "--web.listen-address=" + addr}, spec.args...)
	if spec.netns != nil {
		bin, args = spec.netns.command(bin, args)
		netnsAddrs.Store(addr, spec.netns.path)
	}
	p, err := h.startProc(spec.name, addr, bin, args, spec.env)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(p, "/ready", 5*time.Millisecond, 60*time.Second); err != nil {
		return nil, err
	}
	e := &exporter{proc: p, path: "/metrics"}
	// Every plugin has started (or failed) once /ready answers; wait for
	// the processes to be listed, and for the count to be stable.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		e.plugins = proctree.Children(p.pid())
		if len(e.plugins) >= len(spec.plugins) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(e.plugins) != len(spec.plugins) {
		return nil, fmt.Errorf("%s: %d plugin processes running, want %d\n%s", spec.name, len(e.plugins), len(spec.plugins), p.logTail())
	}
	// A sandboxed plugin runs below its launcher, the init of its PID
	// namespace: the host's child is the launcher, the plugin its child.
	// Measure every process below the host, or the plugin's CPU is lost.
	e.plugins = proctree.Descendants(p.pid())
	// Record whether the plugins run in their sandbox (the production
	// default when the host runs as root).
	if body, err := h.getBody(p.url + e.path); err == nil {
		for _, m := range sandboxedLine.FindAllStringSubmatch(string(body), -1) {
			h.sandboxed[m[2]]++
		}
	}
	return e, nil
}

// format is an exposition format as a scraper asks for it.
type format struct {
	name   string
	accept string
	gzip   bool
	ctype  string // expected Content-Type prefix
}

var (
	fmtText        = format{"text", "text/plain;version=0.0.4", false, "text/plain"}
	fmtTextGzip    = format{"text+gzip", "text/plain;version=0.0.4", true, "text/plain"}
	fmtOpenMetrics = format{"OpenMetrics", "application/openmetrics-text;version=1.0.0", false, "application/openmetrics-text"}
	fmtProtobuf    = format{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", false, "application/vnd.google.protobuf"}
	allFormats     = []format{fmtText, fmtTextGzip, fmtOpenMetrics, fmtProtobuf}
)

// runResult is one run: per-scrape means.
type runResult struct {
	wall, cpu float64 // seconds per scrape
	cpuMain   float64 // of cpu, the exporter's main process (the host)
	bytes     int64   // body bytes of one scrape
	scrapes   int
}

// maxScrapesPerRun bounds a run in count (the time bound is -min-run plus one scrape).
const maxScrapesPerRun = 20000

// measureRun scrapes e in format f until h.minRun has passed (at least one
// scrape, at most maxScrapesPerRun) and returns the per-scrape means.
func (h *harness) measureRun(e *exporter, f format) (runResult, error) {
	url := e.url + e.path
	pids := e.pids()
	cpu0, err := proctree.CPUSum(pids)
	if err != nil {
		return runResult{}, err
	}
	main0, _ := proctree.CPUSum(pids[:1])
	var r runResult
	t0 := time.Now()
	for r.scrapes < maxScrapesPerRun {
		n, ctype, err := h.get(url, f.accept, f.gzip)
		if err != nil {
			return r, fmt.Errorf("%s: %w", e.name, err)
		}
		if !strings.HasPrefix(ctype, f.ctype) {
			return r, fmt.Errorf("%s: asked for %s, got Content-Type %q", e.name, f.name, ctype)
		}
		r.bytes = n
		r.scrapes++
		if time.Since(t0) >= h.minRun {
			break
		}
	}
	elapsed := time.Since(t0).Seconds()
	cpu1, err := proctree.CPUSum(pids)
	if err != nil {
		return r, fmt.Errorf("%s: %w", e.name, err)
	}
	main1, _ := proctree.CPUSum(pids[:1])
	r.wall = elapsed / float64(r.scrapes)
	r.cpu = (cpu1 - cpu0) / float64(r.scrapes)
	r.cpuMain = (main1 - main0) / float64(r.scrapes)
	return r, nil
}

// cell collects the runs of one (exporter, format).
type cell struct {
	wall, cpu, cpuMain []float64
	bytes              int64
	scrapes            int
}

func (c *cell) add(r runResult) {
	c.wall = append(c.wall, r.wall)
	c.cpu = append(c.cpu, r.cpu)
	c.cpuMain = append(c.cpuMain, r.cpuMain)
	c.bytes = r.bytes
	c.scrapes += r.scrapes
}

func (c *cell) Wall() float64 { return median(c.wall) }
func (c *cell) CPU() float64  { return median(c.cpu) }

// HostCPU is the median CPU of the main process (for a host: without plugins).
func (c *cell) HostCPU() float64 { return median(c.cpuMain) }

// compare measures the exporters in format f for h.runs runs, interleaved
// (the order rotates every run), after two warm-up scrapes each.
func (h *harness) compare(f format, es ...*exporter) ([]*cell, error) {
	for _, e := range es {
		for range 2 {
			if _, _, err := h.get(e.url+e.path, f.accept, f.gzip); err != nil {
				return nil, fmt.Errorf("%s: warm-up: %w", e.name, err)
			}
		}
	}
	cells := make([]*cell, len(es))
	for i := range cells {
		cells[i] = &cell{}
	}
	for run := range h.runs {
		for k := range es {
			i := (k + run) % len(es)
			r, err := h.measureRun(es[i], f)
			if err != nil {
				return nil, err
			}
			cells[i].add(r)
		}
	}
	for _, e := range es {
		if err := e.alive(); err != nil {
			return nil, err
		}
	}
	return cells, nil
}

// seriesLines counts the sample lines of a text exposition whose name starts
// with one of the prefixes (all sample lines when none is given).
func seriesLines(body []byte, prefixes ...string) int {
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if line != "" && line[0] != '#' && (len(prefixes) == 0 || hasAnyPrefix(line, prefixes)) {
			n++
		}
	}
	return n
}

// familyCount counts the # TYPE lines of families with one of the prefixes.
func familyCount(body []byte, prefixes ...string) int {
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok && hasAnyPrefix(name, prefixes) {
			n++
		}
	}
	return n
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

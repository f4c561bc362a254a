package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
)

const sharedPlugins = 6

func (h *harness) benchPluginBin() string {
	return filepath.Join(h.binDir, "bench", "plexporter-bench")
}
func (h *harness) chaosBin() string { return filepath.Join(h.binDir, "bench", "plexporter-chaos") }

// benchHost starts a host whose plugins share n series of the workload.
func (h *harness) benchHost(name string, n, plugins int, args ...string) (*exporter, error) {
	return h.benchHostOf(h.binDir, name, n, plugins, args...)
}

// benchHostOf is benchHost with the host and the bench plugin of the build
// in binDir.
func (h *harness) benchHostOf(binDir, name string, n, plugins int, args ...string) (*exporter, error) {
	spec := hostSpec{name: name, plugins: map[string]string{}, args: append([]string{"--log.level=warn"}, args...),
		bin: filepath.Join(binDir, "plexporter")}
	plugin := filepath.Join(binDir, "bench", "plexporter-bench")
	var cfg strings.Builder
	for i := range plugins {
		pname := "bench"
		if plugins > 1 {
			pname = "bench" + strconv.Itoa(i+1)
		}
		spec.plugins[pname] = plugin
		fmt.Fprintf(&cfg, "  %s: {timeout: 60s, max_series: 100000000, config: {series: %d, shard: %d, shards: %d}}\n", pname, n, i, plugins)
	}
	spec.config = cfg.String()
	return h.startHost(spec)
}

// scenarioExposition is scenario 1.
func (h *harness) scenarioExposition() error {
	sec := &section{id: "1", title: "Exposition cost: client_golang in process (A) vs host + 1 plugin (B) vs host + 6 plugins (C)"}
	defer h.report.add(sec)
	sec.text = append(sec.text, fmt.Sprintf("Workload (`internal/dev/bench/workload`): per size *n*, 60%% counters with 3 labels, "+
		"27%% gauges with 2 labels, 13%% of the series in *n*/100 10-bucket histograms with 2 labels, over %d families "+
		"(10 per type). (A) holds them in client_golang vectors (plus the Go and process collectors) served by promhttp, "+
		"in its own process. (B) is `plexporter` with the bench plugin writing all of them; (C) is `plexporter` with %d "+
		"instances of the bench plugin, each writing every %d-th series of every family (the host joins the families). "+
		"The plugins hold their label values and write them on each Collect, as a plugin with its data at hand does. "+
		"Bytes are one scrape's body (B). A/B/C expose the same series with the same values; the harness checks "+
		"the series counts at every size and the full equality at the smallest one.",
		3*workload.FamiliesPerKind, sharedPlugins, sharedPlugins))

	header := []string{"series", "format", "A wall ms", "A CPU ms", "B wall ms", "B CPU ms", "C wall ms", "C CPU ms",
		"B/A wall", "B/A CPU", "C/A wall", "C/A CPU", "bytes (B)"}
	var rows [][]string
	type key struct {
		n int
		f string
	}
	results := map[key][]*cell{}
	var rss, split, versus [][]string
	for _, n := range h.sizes {
		a, err := h.startBaseline(fmt.Sprintf("A-%d", n), n)
		if err != nil {
			return err
		}
		b, err := h.benchHost(fmt.Sprintf("B-%d", n), n, 1)
		if err != nil {
			return err
		}
		c, err := h.benchHost(fmt.Sprintf("C-%d", n), n, sharedPlugins)
		if err != nil {
			return err
		}
		es := []*exporter{a, b, c}
		if h.compareBin != "" {
			b2, err := h.benchHostOf(h.compareBin, fmt.Sprintf("B2-%d", n), n, 1)
			if err != nil {
				return err
			}
			es = append(es, b2)
		}
		if err := h.checkSameSeries(n, n == h.sizes[0], es...); err != nil {
			return err
		}
		for _, f := range h.formats {
			h.debugf("  %d series, %s", n, f.name)
			cells, err := h.compare(f, es...)
			if err != nil {
				return err
			}
			if len(cells) > 3 {
				versus = append(versus, versusRow(n, f.name, cells[0], cells[1], cells[3]))
			}
			results[key{n, f.name}] = cells
			A, B, C := cells[0], cells[1], cells[2]
			split = append(split, []string{fmt.Sprint(n), f.name, ms(B.HostCPU()), ms(B.CPU() - B.HostCPU()), ms(C.HostCPU()), ms(C.CPU() - C.HostCPU())})
			rows = append(rows, []string{fmt.Sprint(n), f.name,
				ms(A.Wall()), ms(A.CPU()), ms(B.Wall()), ms(B.CPU()), ms(C.Wall()), ms(C.CPU()),
				ratio(B.Wall(), A.Wall()), ratio(B.CPU(), A.CPU()), ratio(C.Wall(), A.Wall()), ratio(C.CPU(), A.CPU()),
				fmt.Sprint(B.bytes)})
		}
		hwm := func(e *exporter) string {
			v, _ := status(e.pid(), "VmHWM")
			return mib(float64(v))
		}
		var pluginRSS []string
		for _, pid := range b.plugins {
			v, _ := status(pid, "VmRSS")
			pluginRSS = append(pluginRSS, mib(float64(v)))
		}
		rss = append(rss, []string{fmt.Sprint(n), mib(a.rss()), mib(b.rss()), hwm(b), strings.Join(pluginRSS, ", "), mib(c.rss()), hwm(c)})
		if n == 100000 {
			h.hostRSS100k = b.rss()
			h.hostHWM100k, _ = status(b.pid(), "VmHWM")
		}
		for _, e := range es {
			e.stop()
		}
	}
	sec.text = append(sec.text, table(header, rows))
	sec.text = append(sec.text, "Where the CPU of B and C goes: the host process vs the plugin processes (ms per scrape, medians):\n\n"+
		table([]string{"series", "format", "B host", "B plugin", "C host", "C 6 plugins"}, split))
	if len(versus) > 0 {
		sec.text = append(sec.text, fmt.Sprintf("B against B2, the same configuration built in `-compare-bin %s`, measured in the same runs "+
			"(A, B, C and B2 interleaved, the order rotating run by run); the ratios are medians of the %d runs' ratios:\n\n", h.compareBin, h.runs)+
			table([]string{"series", "format", "B CPU ms", "B host", "B plugin", "B2 CPU ms", "B2 host", "B2 plugin", "B/B2 CPU", "B/A CPU", "B2/A CPU"}, versus))
	}
	sec.text = append(sec.text, "RSS after the runs above (MiB; HWM = peak):\n\n"+
		table([]string{"series", "A RSS", "B host RSS", "B host HWM", "B plugin RSS", "C host RSS", "C host HWM"}, rss))

	// Targets at 100k.
	if cells, ok := results[key{100000, "text"}]; ok {
		A, B := cells[0], cells[1]
		h.report.atMost("1", "100k text, host + 1 plugin: wall per scrape ≤ 75 ms", " ms", B.Wall()*1000, 75)
		h.report.atMost("1", "100k text, host + 1 plugin: CPU (host + plugin) per scrape ≤ 75 ms", " ms", B.CPU()*1000, 75)
		h.report.atMost("1", "100k text: wall of B ≤ 0.2× A (same run)", "×", B.Wall()/A.Wall(), 0.2)
		h.report.atMost("1", "100k text: CPU of B ≤ 0.2× A (same run)", "×", B.CPU()/A.CPU(), 0.2)
		h.report.atMost("1", "100k text: CPU of B ≤ 0.10× A (same run; issue 33)", "×", B.CPU()/A.CPU(), 0.10)
		mbs := float64(B.bytes) / B.Wall() / 1e6
		h.report.atLeast("1", "100k text: ≥ 250 MB/s of text end to end (body bytes / wall of B)", " MB/s", mbs, 250)
		h.text100kBytes = B.bytes
		C := cells[2]
		sec.text = append(sec.text, fmt.Sprintf("At 100k, text: B serves %.1f MB/s of text end to end (body / wall) and %.1f MB per CPU-second; "+
			"C (6 plugins) costs %s the CPU of B.", mbs, float64(B.bytes)/B.CPU()/1e6, ratio(C.CPU(), B.CPU())))
	}
	if cells, ok := results[key{100000, "text+gzip"}]; ok {
		h.report.atMost("1", "100k text+gzip, host + 1 plugin: wall per scrape ≤ 150 ms", " ms", cells[1].Wall()*1000, 150)
	}
	return nil
}

// checkSameSeries compares the workload's series counts of A, B and C (and,
// if full, the sorted sample lines of the workload's families).
func (h *harness) checkSameSeries(n int, full bool, es ...*exporter) error {
	want := workload.Series(n)
	var ref []string
	for i, e := range es {
		body, err := h.getBody(e.url + e.path)
		if err != nil {
			return err
		}
		if got := seriesLines(body, "bench_"); got != want {
			return fmt.Errorf("%s exposes %d workload series, want %d", e.name, got, want)
		}
		if !full {
			continue
		}
		var lines []string
		for _, l := range bytes.Split(body, []byte("\n")) {
			if bytes.HasPrefix(l, []byte("bench_")) {
				lines = append(lines, string(l))
			}
		}
		sort.Strings(lines)
		if i == 0 {
			ref = lines
			continue
		}
		for j := range lines {
			if lines[j] != ref[j] {
				return fmt.Errorf("%s and %s differ: %q vs %q", es[0].name, e.name, ref[j], lines[j])
			}
		}
	}
	return nil
}

// scenarioAllowlist is scenario 4: the same 100k workload with the allowlist
// enabling 10% of the families, against the full scrape, interleaved.
func (h *harness) scenarioAllowlist() error {
	sec := &section{id: "4", title: "Allowlist pushdown: 10% of the families vs all (100k series, host + 1 plugin, text)"}
	defer h.report.add(sec)
	const n = 100000
	full, err := h.benchHost("allow-full", n, 1)
	if err != nil {
		return err
	}
	pats := strings.Join(workload.Allowlist(), ",")
	part, err := h.benchHost("allow-10pct", n, 1, "--metrics.enabled="+pats)
	if err != nil {
		return err
	}
	body, err := h.getBody(part.url + part.path)
	if err != nil {
		return err
	}
	enabled := seriesLines(body, "bench_")
	cells, err := h.compare(fmtText, full, part)
	if err != nil {
		return err
	}
	F, P := cells[0], cells[1]
	sec.text = append(sec.text, fmt.Sprintf("`--metrics.enabled=%s`: %d of %d families, %d of %d series. "+
		"The plugin skips disabled families before touching their samples (`Writer.Enabled`), so they are neither "+
		"written nor sent. The allowlist also hides the host's own `go_*`, `process_*` and `plexporter_*` families.",
		pats, len(workload.Allowlist()), 3*workload.FamiliesPerKind, enabled, workload.Series(n)))
	sec.text = append(sec.text, table([]string{"scrape", "wall ms", "CPU ms", "bytes"}, [][]string{
		{"all families", ms(F.Wall()), ms(F.CPU()), fmt.Sprint(F.bytes)},
		{"10% of families", ms(P.Wall()), ms(P.CPU()), fmt.Sprint(P.bytes)},
		{"ratio", ratio(P.Wall(), F.Wall()), ratio(P.CPU(), F.CPU()), ratio(float64(P.bytes), float64(F.bytes))},
	}))
	h.report.atMost("4", "10% of families enabled: CPU ≤ 0.2× the full scrape", "×", P.CPU()/F.CPU(), 0.2)
	h.report.atMost("4", "10% of families enabled: wall ≤ 0.2× the full scrape", "×", P.Wall()/F.Wall(), 0.2)
	return nil
}

// versusRow compares B with B2 (scenario 1 with -compare-bin): CPU per
// scrape, host and plugin, and the medians of the per-run ratios (the
// cells' runs are aligned: compare measures every exporter once a run).
func versusRow(n int, format string, a, b, b2 *cell) []string {
	perRun := func(x, y []float64) float64 {
		var r []float64
		for i := range min(len(x), len(y)) {
			if y[i] > 0 {
				r = append(r, x[i]/y[i])
			}
		}
		return median(r)
	}
	x := func(v float64) string { return fmt.Sprintf("%.3f×", v) }
	return []string{fmt.Sprint(n), format,
		ms(b.CPU()), ms(b.HostCPU()), ms(b.CPU() - b.HostCPU()),
		ms(b2.CPU()), ms(b2.HostCPU()), ms(b2.CPU() - b2.HostCPU()),
		x(perRun(b.cpu, b2.cpu)), x(perRun(b.cpu, a.cpu)), x(perRun(b2.cpu, a.cpu))}
}

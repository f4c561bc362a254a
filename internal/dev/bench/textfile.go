package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	textfileFiles  = 1000
	textfileSeries = 100 // per file: 10 families of 10 series
)

// textfileName is the name of file f of the scenario's directory.
func textfileName(f int) string { return fmt.Sprintf("job-%04d.prom", f) }

// writeTextfiles writes files `*.prom` files of `series` gauge samples each
// into dir (which must exist), as job scripts write them: ten series per
// family, every family in every file with its HELP and TYPE, one label
// telling the files apart. Each file is written under a name that does not
// end in .prom and renamed into place (a new inode, a new mtime), mode
// 0644. version goes into every value, so that two versions of a file
// differ in content; version 0 is the first.
func writeTextfiles(dir string, files, series, version int) error {
	var b strings.Builder
	for f := range files {
		b.Reset()
		for s := range series {
			fam := s / 10
			if s%10 == 0 {
				fmt.Fprintf(&b, "# HELP job_metric_%d A job script's metric.\n# TYPE job_metric_%d gauge\n", fam, fam)
			}
			fmt.Fprintf(&b, "job_metric_%d{job=\"job-%d\",step=\"%d\"} %d.%d\n", fam, f, s%10, f*series+s, version)
		}
		name := filepath.Join(dir, textfileName(f))
		tmp := name + ".tmp"
		if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
			return err
		}
		// WriteFile's mode is filtered by the umask: set it.
		if err := os.Chmod(tmp, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, name); err != nil {
			return err
		}
	}
	return nil
}

var textfilePaces = []pace{{"back-to-back", 0}, {"1 s", time.Second}, {"15 s", 15 * time.Second}}

// scenarioTextfile is scenario 8: the textfile plugin against
// node_exporter's textfile collector on the same directory.
func (h *harness) scenarioTextfile() error {
	sec := &section{id: "8", title: fmt.Sprintf("textfile: plexporter-textfile vs node_exporter --collector.textfile (%s files × %d series)", thousands(textfileFiles), textfileSeries)}
	defer h.report.add(sec)
	plugin := h.versusPlugin(sec, "textfile")
	if plugin == "" {
		return nil
	}
	dir := filepath.Join(h.trees, "textfile")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the umask
		return err
	}
	version := 0
	if err := writeTextfiles(dir, textfileFiles, textfileSeries, version); err != nil {
		return err
	}
	total := textfileFiles * textfileSeries
	plex, err := h.startHost(hostSpec{
		name:    "textfile-plexporter",
		plugins: map[string]string{"textfile": plugin},
		// The plugin's and the host's series caps (50,000 and 100,000 by
		// default) raised above the 100,000 series; the collect timeout
		// raised so that a loaded machine does not turn a cold scrape into
		// an empty one (the wall time is reported).
		config: fmt.Sprintf("  textfile: {timeout: 30s, max_series: %d, config: {directories: [%q], max_series: %d, max_series_per_file: %d}, manifest: {paths: {read_only: [%q]}}}\n",
			2*total, dir, 2*total, 10*textfileSeries, dir),
		args: []string{"--log.level=warn", "--scrape.timeout=30s"},
	})
	if err != nil {
		return err
	}
	ne, err := h.startNodeExporter("textfile-node_exporter", "--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir)
	if err != nil {
		return err
	}
	es := []*exporter{plex, ne}
	load0 := loadAverage()
	for _, e := range es {
		body, err := h.getBody(e.url + e.path)
		if err != nil {
			return err
		}
		if n := seriesLines(body, "job_metric_"); n != total {
			return fmt.Errorf("%s exposes %d job_metric_* series, want %d (log: %s)", e.name, n, total, e.logPath)
		}
	}
	sec.text = append(sec.text, fmt.Sprintf("Directory: %s files (`job-0000.prom` … `job-%04d.prom`) of %d gauge series each, ten families of ten "+
		"series, every family in every file with its `# HELP` and `# TYPE` (%s series, %s families), written by the harness "+
		"on tmpfs (`/dev/shm`) when there is one, mode 0644 in a 0755 directory. plexporter: the host with only the textfile "+
		"plugin, sandboxed under its shipped manifest with the directory granted read-only (`manifest: {paths: {read_only: "+
		"[<dir>]}}`), `directories: [<dir>]`, the plugin's `max_series` and the host's per-plugin `max_series` raised to %s "+
		"(the defaults, 50,000 and 100,000, are below the directory's series), collect timeout 30 s. node_exporter: "+
		"`--collector.disable-defaults --collector.textfile --collector.textfile.directory=<dir>`. Both bodies hold the "+
		"%s `job_metric_*` series and their exporter's own families.",
		thousands(textfileFiles), textfileFiles-1, textfileSeries, thousands(total), thousands(textfileSeries/10), thousands(2*total), thousands(total)))
	sec.text = append(sec.text, fmt.Sprintf("The two exporters are scraped in turn, one scrape of each per round (back to back the "+
		"order alternates; at a pace their scrapes are half a period apart), a round starting at the pace (or at once when "+
		"the previous one took longer: the period column says what was held); %d rounds per pace. A round's CPU is that of "+
		"each process tree from just before one of its scrapes to just before its next, so what an exporter does between "+
		"scrapes counts; the figures are means over the rounds. *Unchanged*: the files stay as they are (a textfile "+
		"directory's usual state: jobs write every few minutes or at their start and end). *Rewritten*: at the start of every "+
		"round the harness rewrites all %s files (new content, renamed into place), so every scrape finds every file "+
		"changed (the worst case: plexporter parses each file again, as node_exporter always does).",
		h.runs, thousands(textfileFiles)))
	for _, c := range []struct {
		name    string
		rewrite bool
	}{{"unchanged", false}, {"rewritten", true}} {
		var before func() error
		if c.rewrite {
			before = func() error {
				version++
				return writeTextfiles(dir, textfileFiles, textfileSeries, version)
			}
		}
		// Two scrapes each first: plexporter's first parses every file.
		for _, e := range es {
			for range 2 {
				if _, err := h.getBody(e.url + e.path); err != nil {
					return err
				}
			}
		}
		var rows [][]string
		for _, p := range textfilePaces {
			h.logf("scenario 8: files %s, %s, %d rounds", c.name, p, h.runs)
			cells, err := h.measurePaced(es, p.every, h.runs, before)
			if err != nil {
				return fmt.Errorf("files %s, pace %s: %w", c.name, p.name, err)
			}
			P, N := cells[0], cells[1]
			rows = append(rows, []string{p.name, fmt.Sprintf("%.2f", P.Period()),
				ms(N.CPU()), ms(P.CPU()), ms(P.HostCPU()), ms(P.CPU() - P.HostCPU()),
				"**" + ratio(N.CPU(), P.CPU()) + "**", ms(N.Wall()), ms(P.Wall())})
			target := fmt.Sprintf("textfile, %s files × %d series, files %s, %s", thousands(textfileFiles), textfileSeries, c.name, p)
			if c.rewrite {
				h.report.info("8", target+": report the CPU ratio (no target)",
					fmt.Sprintf("node_exporter / plexporter = %s CPU, %s wall", ratio(N.CPU(), P.CPU()), ratio(N.Wall(), P.Wall())))
			} else {
				h.report.atLeast("8", target+": node_exporter CPU / plexporter CPU per scrape ≥ 1", "×", N.CPU()/P.CPU(), 1)
			}
		}
		sec.text = append(sec.text, fmt.Sprintf("Files %s:\n\n", c.name)+table([]string{"pace (one scrape of each every …)", "period held (s)",
			"node_exporter CPU ms", "plexporter CPU ms", "of it host", "of it plugin", "node_exporter / plexporter CPU",
			"node_exporter wall ms", "plexporter wall ms"}, rows))
	}
	var pluginHWM int64
	for _, pid := range plex.plugins {
		if v, err := status(pid, "VmHWM"); err == nil {
			pluginHWM = max(pluginHWM, v)
		}
	}
	hostHWM, _ := status(plex.pid(), "VmHWM")
	neHWM, _ := status(ne.pid(), "VmHWM")
	sec.text = append(sec.text, fmt.Sprintf("Peak RSS (VmHWM) at the end: plexporter host %s MiB, textfile plugin %s MiB (its manifest's "+
		"`limits.memory` is 128 MiB), node_exporter %s MiB. Load average (1, 5, 15 min) when the measurement began: %s; when it ended: %s.",
		mib(float64(hostHWM)), mib(float64(pluginHWM)), mib(float64(neHWM)), load0, loadAverage()))
	return nil
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// shippedPlugins lists bin/plugins/plexporter-<name> executables.
func (h *harness) shippedPlugins() map[string]string {
	out := map[string]string{}
	ents, _ := os.ReadDir(filepath.Join(h.binDir, "plugins"))
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), "plexporter-")
		if !ok || strings.HasSuffix(name, ".yaml") || e.IsDir() {
			continue
		}
		out[name] = filepath.Join(h.binDir, "plugins", e.Name())
	}
	return out
}

var upLine = regexp.MustCompile(`(?m)^plexporter_plugin_up\{plugin="([^"]+)"\} (\S+)$`)

// scenarioStartup is scenario 5: cold start to /ready with every shipped
// plugin, and memory.
func (h *harness) scenarioStartup() error {
	sec := &section{id: "5", title: "Cold start and memory"}
	defer h.report.add(sec)
	plugins := h.shippedPlugins()
	if len(plugins) == 0 {
		sec.skipped = "no plugin in bin/plugins (run `make build`)."
		return nil
	}
	var names []string
	for n := range plugins {
		names = append(names, n)
	}
	sort.Strings(names)

	// The shipped config's plugins: section: the operator's opt-in to the
	// capabilities of ebpf, nvme and attribution, without which the host
	// refuses them (issue 29).
	shipped, err := h.shippedPluginsConfig()
	if err != nil {
		return err
	}

	var ready, idleHost, scrapedHost []float64
	pluginRSS := map[string][]float64{}
	var down []string
	for run := range h.runs {
		began := time.Now()
		e, err := h.startHost(hostSpec{name: fmt.Sprintf("start-%d", run), plugins: plugins, config: shipped})
		if err != nil {
			return err
		}
		ready = append(ready, time.Since(began).Seconds())
		time.Sleep(time.Second) // settle: plugins finish Configure, the host its first GC cycle
		idleHost = append(idleHost, e.rss())
		pidName := map[int]string{}
		for _, pid := range e.plugins {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			arg0, _, _ := strings.Cut(string(b), "\x00")
			pidName[pid] = strings.TrimPrefix(filepath.Base(arg0), "plexporter-")
			v, _ := status(pid, "VmRSS")
			pluginRSS[pidName[pid]] = append(pluginRSS[pidName[pid]], float64(v))
		}
		var body []byte
		for range 3 {
			if body, err = h.getBody(e.url + e.path); err != nil {
				return err
			}
		}
		scrapedHost = append(scrapedHost, e.rss())
		if run == 0 {
			for _, m := range upLine.FindAllStringSubmatch(string(body), -1) {
				if m[2] != "1" {
					down = append(down, m[1])
				}
			}
		}
		e.stop()
	}
	sec.text = append(sec.text, fmt.Sprintf("The host with every shipped plugin (%s) from `bin/plugins`, real `/sys` and `/proc`, default "+
		"flags and the shipped config's `plugins:` section (`deploy/etc/plexporter.yml`: the capability opt-ins); time from starting the host process to the first 200 from `/ready` (polled every 5 ms), %d cold starts. "+
		"RSS: 1 s after `/ready` (idle, never scraped), and after 3 scrapes.", strings.Join(names, ", "), h.runs))
	if len(down) > 0 {
		sec.text = append(sec.text, fmt.Sprintf("Plugins not up on this machine (they started and failed their start, which also ends the wait for /ready): %s.", strings.Join(down, ", ")))
	}
	rows := [][]string{
		{"cold start to /ready", ms(median(ready)) + " ms", fmt.Sprintf("min %s, max %s ms", ms(slicesMin(ready)), ms(slicesMax(ready)))},
		{"host RSS, idle", mib(median(idleHost)) + " MiB", ""},
		{"host RSS, after 3 scrapes", mib(median(scrapedHost)) + " MiB", ""},
	}
	maxPlugin := 0.0
	for _, n := range names {
		v := median(pluginRSS[n])
		maxPlugin = max(maxPlugin, v)
		rows = append(rows, []string{"plugin " + n + " RSS, idle", mib(v) + " MiB", ""})
	}
	if h.hostRSS100k > 0 {
		rows = append(rows, []string{"host RSS at 100k series (scenario 1, B, after its runs)", mib(h.hostRSS100k) + " MiB", "peak (VmHWM) " + mib(float64(h.hostHWM100k)) + " MiB"})
	}
	sec.text = append(sec.text, table([]string{"", "median", ""}, rows))

	h.report.atMost("5", "cold start to /ready with every shipped plugin ≤ 1 s", " ms", median(ready)*1000, 1000)
	h.report.atMost("5", "idle host RSS ≤ 30 MiB (after 3 scrapes)", " MiB", max(median(idleHost), median(scrapedHost))/(1<<20), 30)
	if h.hostRSS100k > 0 {
		h.report.atMost("5", "host RSS at 100k series ≤ 100 MiB (peak VmHWM)", " MiB", float64(h.hostHWM100k)/(1<<20), 100)
	}
	h.report.atMost("5", "idle plugin RSS ≤ 20 MiB (largest shipped plugin)", " MiB", maxPlugin/(1<<20), 20)
	return nil
}

func slicesMin(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func slicesMax(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// shippedPluginsConfig is the plugins: section of the shipped config
// (deploy/etc/plexporter.yml), as hostSpec.config takes it.
func (h *harness) shippedPluginsConfig() (string, error) {
	path := filepath.Join(h.root, "deploy", "etc", "plexporter.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var doc struct {
		Plugins map[string]any `yaml:"plugins"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Plugins) == 0 {
		return "", nil
	}
	out, err := yaml.Marshal(doc.Plugins)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		lines = append(lines, "  "+l)
	}
	return strings.Join(lines, "\n") + "\n", nil
}

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Issue 29's measurement, run by hand (it asserts nothing, it reports):
// PLEXPORTER_CPU_MEASURE=1 go test -v -run TestCPULimitMeasure ./host/
// A healthy plugin's scrape duration (1000 series, sandboxed) alone, then
// beside a plugin spinning four threads under limits.cpu 0.2, then beside
// the same spinner with no limits.cpu (the default: 1 CPU).
// Each host is measured on its own, one after another, on the same tree.
func TestCPULimitMeasure(t *testing.T) {
	if os.Getenv("PLEXPORTER_CPU_MEASURE") == "" {
		t.Skip("a measurement, not a test: set PLEXPORTER_CPU_MEASURE=1")
	}
	const n = 100
	st := newSandboxTree(t)
	copyFile(t, filepath.Join(binDir, "chaos"), filepath.Join(st.bin, "chaos"), 0o755)
	if err := os.Symlink(filepath.Join(st.bin, "chaos"), filepath.Join(st.plugins, "plexporter-healthy")); err != nil {
		t.Fatal(err)
	}
	st.install(t, "spinner", limitsManifest("{memory: 96MiB, cpu: 0.2}"))
	measure := func(what, spinnerYAML string) float64 {
		h := startSandboxHost(t, st, "  healthy: {config: {series: 1000}}\n"+spinnerYAML)
		defer h.cmd.Process.Kill()
		for range 5 {
			h.scrape("?collect[]=healthy")
		}
		var d []float64
		for range n {
			_, mfs := h.scrape("?collect[]=healthy")
			d = append(d, value(mfs, "plexporter_plugin_scrape_duration_seconds", "plugin", "healthy"))
			time.Sleep(100 * time.Millisecond)
		}
		_, mfs := h.scrape("")
		slices.Sort(d)
		p50, p95 := d[len(d)/2], d[len(d)*95/100]
		t.Logf("%-44s p50 %6.2f ms, p95 %6.2f ms; spinner CPU %.1f s, throttled %.1f s", what, p50*1e3, p95*1e3,
			value(mfs, "plexporter_plugin_cpu_seconds_total", "plugin", "spinner"),
			value(mfs, "plexporter_plugin_cpu_throttled_seconds_total", "plugin", "spinner"))
		return p95
	}
	alone := measure("healthy plugin alone:", "  spinner: {enabled: false}\n")
	limited := measure("beside 4 spinning threads, limits.cpu 0.2:", "  spinner: {config: {spin: 4}}\n")
	if err := os.WriteFile(filepath.Join(st.plugins, "plexporter-spinner.yaml"), []byte(limitsManifest("{memory: 96MiB}")), 0o644); err != nil {
		t.Fatal(err)
	}
	weighted := measure("beside 4 spinning threads, default (1 CPU):", "  spinner: {config: {spin: 4}}\n")
	t.Logf("p95 ratios to alone: limits.cpu 0.2 %.2f×, default limits.cpu (1 CPU) %.2f×", limited/alone, weighted/alone)
}

// Issue 28's measurement (TestBudgetsMeasure) as a node runs it: every
// plugin sandboxed, each in its cgroup with the default limits, the error
// flooder given the memory its 400 MB of errors a collect need (under the
// default 256 MiB it is OOM-killed instead, which is the sandbox working,
// not the budget). PLEXPORTER_CPU_MEASURE=1 go test -v -run TestBudgetsSandboxedMeasure ./host/
func TestBudgetsSandboxedMeasure(t *testing.T) {
	if os.Getenv("PLEXPORTER_CPU_MEASURE") == "" {
		t.Skip("a measurement, not a test: set PLEXPORTER_CPU_MEASURE=1")
	}
	const n = 100
	st := floodsTree(t)
	// PLEXPORTER_DEMOTION_OFF=1: the offenders keep their CPU weight
	// (--plugin.cpu-demotion=0), for a figure to compare.
	demotion := "--plugin.cpu-demotion=1m"
	if os.Getenv("PLEXPORTER_DEMOTION_OFF") != "" {
		demotion = "--plugin.cpu-demotion=0"
	}
	h := startSandboxHost(t, st, `
  errors: {config: {errors: 100, error_bytes: 4186000}}
  flood: {config: {series: 1, log_flood: json}}
  healthy: {config: {series: 1000}}
`, "--scrape.timeout=5s", demotion)
	p95 := func(query string) (float64, float64, time.Duration) { return healthyScrapeDurations(h, n, query) }
	for range 3 {
		h.scrape("?collect[]=healthy")
	}
	idle, _ := hostMemory(t, h)
	p50a, p95a, longA := p95("?collect[]=healthy")
	p50b, p95b, longB := p95("")
	rss, peak := hostMemory(t, h)
	_, mfs := h.scrape("")
	t.Logf("host RSS: idle %.1f MiB, after %.1f MiB, peak %.1f MiB (+%.1f MiB)", mib(idle), mib(rss), mib(peak), mib(peak)-mib(idle))
	t.Logf("healthy plugin's scrape duration alone: p50 %.1f ms, p95 %.1f ms (longest scrape %v)", p50a*1e3, p95a*1e3, longA)
	t.Logf("beside the error and log floods:       p50 %.1f ms, p95 %.1f ms (longest scrape %v; timeout 5 s): %.2f×", p50b*1e3, p95b*1e3, longB, p95b/p95a)
	t.Logf("restarts: errors %v, flood %v; log lines dropped %v; demoted (plexporter_plugin_cpu_demoted): errors %v, flood %v, healthy %v", value(mfs, "plexporter_plugin_restarts_total", "plugin", "errors"),
		value(mfs, "plexporter_plugin_restarts_total", "plugin", "flood"), value(mfs, "plexporter_plugin_log_dropped_total", "plugin", "flood"),
		value(mfs, "plexporter_plugin_cpu_demoted", "plugin", "errors"), value(mfs, "plexporter_plugin_cpu_demoted", "plugin", "flood"), value(mfs, "plexporter_plugin_cpu_demoted", "plugin", "healthy"))
}

package scrape

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// counters are the self-metrics that outlive a scrape: what the guard
// dropped and the partial errors plugins reported, since the host started.
// Every merge adds its drops, every plugin answer its errors, and each
// scrape reports the totals.
type counters struct {
	mu            sync.Mutex
	dropped       map[guard.DropKey]float64
	errors        map[[2]string]float64 // plugin, collector
	errorsDropped map[string]float64    // plugin: partial errors past the budget
}

func newCounters() *counters {
	return &counters{dropped: map[guard.DropKey]float64{}, errors: map[[2]string]float64{}, errorsDropped: map[string]float64{}}
}

// maxCollectors bounds the distinct collector label values one plugin can
// create in plexporter_plugin_collect_errors_total: the names come from the
// plugin, and a counter series lives as long as the host, so a plugin
// naming a new collector in every error would grow the host without end.
// Errors of further collectors are counted under OverflowCollector.
const maxCollectors = 64

// OverflowCollector is the collector label of errors beyond maxCollectors.
const OverflowCollector = "_other_collectors"

// addErrors counts the partial errors of one plugin's answer.
func (c *counters) addErrors(plugin string, errs []*pluginv1.CollectError, dropped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dropped > 0 || c.errorsDropped[plugin] > 0 {
		c.errorsDropped[plugin] += float64(dropped)
	}
	for _, e := range errs {
		k := [2]string{plugin, e.Collector}
		if _, seen := c.errors[k]; !seen && c.collectors(plugin) >= maxCollectors {
			k[1] = OverflowCollector
		}
		c.errors[k]++
	}
}

// collectors is the number of collector series a plugin has.
func (c *counters) collectors(plugin string) int {
	n := 0
	for k := range c.errors {
		if k[0] == plugin {
			n++
		}
	}
	return n
}

// addDrops counts one merge's drops and returns a copy of the totals, the
// partial errors' included.
func (c *counters) addDrops(res *guard.Result) (map[guard.DropKey]float64, map[[2]string]float64, map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range res.Drops {
		c.dropped[k] += float64(n)
	}
	return maps.Clone(c.dropped), maps.Clone(c.errors), maps.Clone(c.errorsDropped)
}

// report is one scrape's self-metrics, made from that scrape's own waits
// and answers and a snapshot of the fleet taken for it. Only the totals
// come from the merge it shares with other scrapes (read-only here), so
// concurrent scrapes, of one selection or of others, each describe
// themselves.
type report struct {
	statuses      []fleet.Status
	refused       []fleet.Refusal
	scraped       map[string]scrapeResult
	dropped       map[guard.DropKey]float64
	errors        map[[2]string]float64
	errorsDropped map[string]float64
	reload        fleet.Reload
}

type scrapeResult struct {
	seconds float64
	success bool
	series  int
}

var (
	descInfo          = gauge("plexporter_plugin_info", "Plugin identity; 1 for every running plugin.", "plugin", "version", "api_version", "sha256")
	descUp            = gauge("plexporter_plugin_up", "1 if the plugin process is running and configured, 0 otherwise (crashed, restarting, refused).", "plugin")
	descMisconfigured = gauge("plexporter_plugin_misconfigured", "1 if the plugin rejects its settings in the config file: it is not started until they change, or, after a rescan, keeps running on its previous ones. The plugin's message is in the log and in `plexporter plugins`.", "plugin")
	descSandboxed     = gauge("plexporter_plugin_sandboxed", "1 if the plugin runs inside its manifest's sandbox; 0 if it runs with the host's own privileges.", "plugin")
	descRestarts      = counter("plexporter_plugin_restarts_total", "Times the plugin was restarted after a crash or a failed start.", "plugin")
	descNextStart     = gauge("plexporter_plugin_next_start_timestamp_seconds", "When the plugin, in backoff after a crash, a hang or a failed start, is started again (seconds since the epoch); present only while it is in backoff.", "plugin")
	descDuration      = gauge("plexporter_plugin_scrape_duration_seconds", "How long this scrape waited for the plugin's Collect: until it answered, or until the scrape's deadline (scrape_success 0). A scrape that joined a Collect under way waited only for its rest.", "plugin")
	descSuccess       = gauge("plexporter_plugin_scrape_success", "1 if the plugin's Collect completed in this scrape (partial errors included), 0 if it failed, timed out or had not answered by the scrape's deadline.", "plugin")
	descSeries        = gauge("plexporter_plugin_series", "Series the plugin contributed to this scrape after the guard.", "plugin")
	descDropped       = counter("plexporter_dropped_series_total", "Series dropped by the guard, by plugin and reason (malformed, invalid_name, label_limit, invalid_label_value, invalid_histogram, invalid_summary, conflict, name_collision, duplicate, series_limit; see the README).", "plugin", "reason")
	descErrors        = counter("plexporter_plugin_collect_errors_total", "Partial failures the plugin reported, by the part that failed.", "plugin", "collector")
	// What a plugin sent past its budgets (docs/security.md): present once
	// the plugin went past one.
	descErrorsDropped   = counter("plexporter_plugin_collect_errors_dropped_total", "Partial errors the host discarded unread because the plugin sent more in one collect than its budget (100 errors, 64 KiB).", "plugin")
	descWarningsDropped = counter("plexporter_plugin_warnings_dropped_total", "Configuration warnings the host did not log because the plugin answered Configure with more than its budget (32 warnings, 16 KiB).", "plugin")
	descLogDropped      = counter("plexporter_plugin_log_dropped_total", "Log lines the host dropped unread because the plugin wrote more than its log budget (100 lines/s, 64 KiB/s, after a burst of 2000 lines or 1 MiB).", "plugin")
	// Read from the plugin's cgroup; absent for a plugin without one.
	descCPU       = counter("plexporter_plugin_cpu_seconds_total", "CPU time the plugin's cgroup used (the plugin and everything it started), since its supervisor started it first.", "plugin")
	descThrottled = counter("plexporter_plugin_cpu_throttled_seconds_total", "Time the plugin's cgroup was throttled by its CPU quota (limits.cpu).", "plugin")
	descMemory    = gauge("plexporter_plugin_memory_bytes", "Memory charged to the plugin's cgroup now (shared memory, memfd, SysV and tmpfs pages included).", "plugin")
	descMemPeak   = gauge("plexporter_plugin_memory_peak_bytes", "Most memory charged to the plugin's cgroup since its supervisor started it first.", "plugin")
	descPids      = gauge("plexporter_plugin_pids", "Tasks (processes and threads) in the plugin's cgroup.", "plugin")
	descOOMKills  = counter("plexporter_plugin_oom_kills_total", "Processes of the plugin the kernel's OOM killer killed for going over limits.memory.", "plugin")
	// The plugin's CPU demotion (supervise/demote.go); absent without a
	// cgroup or with --plugin.cpu-demotion=0.
	descDemoted   = gauge("plexporter_plugin_cpu_demoted", "1 while the plugin's cgroup has the lowest CPU weight because the plugin went past its partial-error or log budget (until it stays within them for --plugin.cpu-demotion); 0 otherwise.", "plugin")
	descDemotions = counter("plexporter_plugin_cpu_demotions_total", "Times the plugin was demoted to the lowest CPU weight for going past its partial-error or log budget.", "plugin")
	// Prometheus's own names for the same thing, so the same alerts work.
	descReloadOK = gauge("plexporter_config_last_reload_successful", "1 if the last reading of the config file (at start, SIGHUP, POST /-/reload or a plugin directory change) succeeded; 0 if it failed and the running plugins keep their settings.")
	descReloadAt = gauge("plexporter_config_last_reload_success_timestamp_seconds", "When the config file was last read successfully (seconds since the epoch).")
	descRefused  = gauge("plexporter_plugin_refused", "1 for a plugin that was found but not run (bad manifest, checksum mismatch, ...); the reason is in the log and in `plexporter plugins`.", "plugin")
)

// write writes the report's families. Series are in a fixed order (the
// fleet's, then by label values), as a registry would sort them.
func (r *report) write(w *selfWriter) {
	for _, st := range r.statuses {
		if st.Info != nil {
			w.value(descInfo, 1, st.Name, st.Info.GetVersion(), st.Info.GetApiVersion(), st.SHA256)
		}
		w.value(descUp, b2f(st.Up()), st.Name)
		w.value(descMisconfigured, b2f(st.Misconfigured()), st.Name)
		w.value(descSandboxed, b2f(st.Sandboxed), st.Name)
		w.value(descRestarts, float64(st.Restarts), st.Name)
		if st.State == supervise.Backoff && !st.NextStart.IsZero() {
			w.value(descNextStart, float64(st.NextStart.UnixNano())/1e9, st.Name)
		}
		if st.State == supervise.Refused {
			w.value(descRefused, 1, st.Name)
		}
		if st.WarningsDropped > 0 {
			w.value(descWarningsDropped, float64(st.WarningsDropped), st.Name)
		}
		if st.LogDropped > 0 {
			w.value(descLogDropped, float64(st.LogDropped), st.Name)
		}
		if n := r.errorsDropped[st.Name]; n > 0 {
			w.value(descErrorsDropped, n, st.Name)
		}
		if res := st.Resources; res != nil {
			for _, m := range []struct {
				d *wire.Header // a counter or a gauge
				v *float64
			}{{descCPU, res.CPUSeconds}, {descThrottled, res.ThrottledSeconds}, {descMemory, res.MemoryBytes}, {descMemPeak, res.MemoryPeakBytes}, {descPids, res.Pids}, {descOOMKills, res.OOMKills}} {
				if m.v != nil { // nil: not offered by this kernel, no sample
					w.value(m.d, *m.v, st.Name)
				}
			}
		}
		if d := st.Demotion; d != nil {
			w.value(descDemoted, b2f(d.On), st.Name)
			w.value(descDemotions, float64(d.Count), st.Name)
		}
		if res, ok := r.scraped[st.Name]; ok {
			w.value(descDuration, res.seconds, st.Name)
			w.value(descSuccess, b2f(res.success), st.Name)
			w.value(descSeries, float64(res.series), st.Name)
		}
	}
	for _, ref := range r.refused {
		w.value(descUp, 0, ref.Plugin.Name)
		w.value(descRefused, 1, ref.Plugin.Name)
	}
	w.value(descReloadOK, b2f(r.reload.Successful))
	if !r.reload.LastSuccess.IsZero() {
		w.value(descReloadAt, float64(r.reload.LastSuccess.UnixNano())/1e9)
	}
	for _, k := range slices.SortedFunc(maps.Keys(r.dropped), func(a, b guard.DropKey) int {
		return cmp.Or(strings.Compare(a.Plugin, b.Plugin), strings.Compare(a.Reason, b.Reason))
	}) {
		w.value(descDropped, r.dropped[k], k.Plugin, k.Reason)
	}
	for _, k := range slices.SortedFunc(maps.Keys(r.errors), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		w.value(descErrors, r.errors[k], k[0], k[1])
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Catalogue is the host's own plexporter_* families, for `plexporter
// metrics`: the self-metrics above and plexporter_build_info (the
// version collector's, read from it).
func Catalogue() []*wire.Header {
	out := []*wire.Header{descInfo, descUp, descMisconfigured, descSandboxed, descRestarts, descNextStart, descDuration,
		descSuccess, descSeries, descDropped, descErrors, descReloadOK, descReloadAt, descRefused,
		descErrorsDropped, descWarningsDropped, descLogDropped,
		descCPU, descThrottled, descMemory, descMemPeak, descPids, descOOMKills, descDemoted, descDemotions}
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector("plexporter"))
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		var labels []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		out = append(out, gauge(mf.GetName(), mf.GetHelp(), labels...))
	}
	slices.SortFunc(out, func(a, b *wire.Header) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// gauge and counter make the header of one of the host's own families.
func gauge(name, help string, labels ...string) *wire.Header {
	return &wire.Header{Name: name, Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Help: help, Labels: labels}
}

func counter(name, help string, labels ...string) *wire.Header {
	return &wire.Header{Name: name, Type: pluginv1.MetricType_METRIC_TYPE_COUNTER, Help: help, Labels: labels}
}

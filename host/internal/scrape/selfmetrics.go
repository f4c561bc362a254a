package scrape

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/merge"
	"github.com/plexporter/plexporter/host/internal/supervise"
)

// selfMetrics are the host's metrics about its plugins. Per-scrape values
// (duration, success, series) describe the scrape that returns them.
type selfMetrics struct {
	mu       sync.Mutex
	statuses []supervise.Status
	refused  []fleet.Refusal
	scraped  map[string]scrapeResult
	dropped  map[merge.DropKey]float64
	errors   map[[2]string]float64
}

type scrapeResult struct {
	seconds float64
	success bool
	series  int
}

var (
	descInfo      = prometheus.NewDesc("plexporter_plugin_info", "Plugin identity; 1 for every running plugin.", []string{"plugin", "version", "api_version", "sha256"}, nil)
	descUp        = prometheus.NewDesc("plexporter_plugin_up", "1 if the plugin process is running and configured, 0 otherwise (crashed, restarting, refused).", []string{"plugin"}, nil)
	descSandboxed = prometheus.NewDesc("plexporter_plugin_sandboxed", "1 if the plugin runs inside its manifest's sandbox; 0 if it runs with the host's own privileges.", []string{"plugin"}, nil)
	descRestarts  = prometheus.NewDesc("plexporter_plugin_restarts_total", "Times the plugin was restarted after a crash or a failed start.", []string{"plugin"}, nil)
	descDuration  = prometheus.NewDesc("plexporter_plugin_scrape_duration_seconds", "Time the plugin's Collect took in this scrape.", []string{"plugin"}, nil)
	descSuccess   = prometheus.NewDesc("plexporter_plugin_scrape_success", "1 if the plugin's Collect completed in this scrape (partial errors included), 0 if it failed or timed out.", []string{"plugin"}, nil)
	descSeries    = prometheus.NewDesc("plexporter_plugin_series", "Series the plugin contributed to this scrape after the guard.", []string{"plugin"}, nil)
	descDropped   = prometheus.NewDesc("plexporter_dropped_series_total", "Series dropped by the guard, by plugin and reason (malformed, invalid_name, invalid_label_value, conflict, duplicate, series_limit).", []string{"plugin", "reason"}, nil)
	descErrors    = prometheus.NewDesc("plexporter_plugin_collect_errors_total", "Partial failures the plugin reported, by the part that failed.", []string{"plugin", "collector"}, nil)
	descRefused   = prometheus.NewDesc("plexporter_plugin_refused", "1 for a plugin that was found but not run (bad manifest, checksum mismatch, ...); the reason is in the log and in `plexporter plugins`.", []string{"plugin"}, nil)
)

func newSelfMetrics() *selfMetrics {
	return &selfMetrics{scraped: map[string]scrapeResult{}, dropped: map[merge.DropKey]float64{}, errors: map[[2]string]float64{}}
}

func (m *selfMetrics) observe(all []*supervise.Supervisor, refused []fleet.Refusal, picked []*supervise.Supervisor, results []*supervise.Collection, res *merge.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.statuses = m.statuses[:0]
	for _, s := range all {
		m.statuses = append(m.statuses, s.Status())
	}
	m.refused = refused
	m.scraped = make(map[string]scrapeResult, len(picked))
	for i, s := range picked {
		name := s.Plugin().Name
		m.scraped[name] = scrapeResult{seconds: results[i].Duration.Seconds(), success: results[i].Err == nil, series: res.Series[name]}
		for _, e := range results[i].Errors {
			m.errors[[2]string{name, e.Collector}]++
		}
	}
	for k, n := range res.Drops {
		m.dropped[k] += float64(n)
	}
}

func (m *selfMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descUp, descSandboxed, descRestarts, descDuration, descSuccess, descSeries, descDropped, descErrors, descRefused} {
		ch <- d
	}
}

func (m *selfMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, st := range m.statuses {
		if st.Info != nil {
			ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, st.Name, st.Info.GetVersion(), st.Info.GetApiVersion(), st.SHA256)
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, b2f(st.Up), st.Name)
		ch <- prometheus.MustNewConstMetric(descSandboxed, prometheus.GaugeValue, b2f(st.Sandboxed), st.Name)
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(st.Restarts), st.Name)
		if r, ok := m.scraped[st.Name]; ok {
			ch <- prometheus.MustNewConstMetric(descDuration, prometheus.GaugeValue, r.seconds, st.Name)
			ch <- prometheus.MustNewConstMetric(descSuccess, prometheus.GaugeValue, b2f(r.success), st.Name)
			ch <- prometheus.MustNewConstMetric(descSeries, prometheus.GaugeValue, float64(r.series), st.Name)
		}
	}
	for _, r := range m.refused {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, r.Plugin.Name)
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.GaugeValue, 1, r.Plugin.Name)
	}
	for k, v := range m.dropped {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, v, k.Plugin, k.Reason)
	}
	for k, v := range m.errors {
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, v, k[0], k[1])
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

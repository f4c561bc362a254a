package main

import (
	"context"
	"os"
	"sync"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// plugin exports the telemetry of every NIXL agent whose ring file is in
// the configured directories. The drainer consumes the rings in the
// background; Collect renders its sums.
type plugin struct {
	mu       sync.Mutex
	drainer  *drainer
	hostname string
	bounds   []float64
	statuses []bool // per errorStatuses: its agent_errors_total series is selected (errorStatusesOn)
}

func newPlugin() *plugin { return &plugin{} }

var _ sdk.Closer = (*plugin)(nil)

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "nixl",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadWritePaths: []string{defaultTelemetryDir}},
	}
}

// Configure validates the settings and (re)starts the drainer.
func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	host := c.Hostname
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			cfg.Warn("hostname: the host's name cannot be read (%v); set hostname, the label is empty until then", err)
		}
		host = h
	}
	for _, dir := range c.TelemetryDirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			cfg.Warn("telemetry_dirs: %s is not a directory yet (NIXL does not create it); agents appear once it exists and NIXL_TELEMETRY_DIR points there", dir)
		}
	}
	_ = p.Close() // a second Configure replaces the previous drainer
	d := newDrainer(c, cfg.Paths.Procfs)
	p.mu.Lock()
	p.drainer, p.hostname, p.bounds, p.statuses = d, host, c.HistogramBucketsUS.bounds, errorStatusesOn(cfg)
	p.mu.Unlock()
	d.start()
	return nil
}

// Close stops the drainer and unmaps the rings (sdk.Closer). Serve calls
// it when the host stops the plugin; tests and a re-Configure do too.
func (p *plugin) Close() error {
	p.mu.Lock()
	d := p.drainer
	p.drainer = nil
	p.mu.Unlock()
	if d != nil {
		d.close()
	}
	return nil
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	d, host, bounds, statuses := p.drainer, p.hostname, p.bounds, p.statuses
	p.mu.Unlock()
	if d == nil {
		return nil
	}
	d.sync(ctx.Done())
	s := d.snapshot()
	for _, e := range s.pending {
		w.Error(e.collector, e.err)
	}
	writeSnapshot(w, s, host, bounds, statuses)
	return ctx.Err()
}

// errorStatusesOn says which status series of agent_errors_total the
// allowlist selects. As in NIXL, where each error status is an event of its
// own (agent_err_backend, ...): a pattern that selects the family by its
// name (agent_errors, agent_*) selects every status; otherwise only the
// statuses whose event a pattern names (agent_err_backend selects
// status="backend", agent_err_* all of them). A denylist pattern naming an
// event removes its status.
func errorStatusesOn(cfg sdk.Config) []bool {
	on := make([]bool, len(errorStatuses))
	if !cfg.Enabled(descErrors) {
		return on
	}
	deny, _ := metricfilter.New(nil, cfg.Filter.Denied()) // patterns the SDK already accepted
	byName := cfg.Filter.Allow(cfg.MetricPrefix + descErrors.Name)
	for i, s := range errorStatuses {
		event := cfg.MetricPrefix + errorEventPrefix + s
		on[i] = cfg.Filter.Allow(event) || (byName && deny.Allow(event))
	}
	return on
}

// writeSnapshot renders one scrape. Every series of a known agent is
// written from its first scrape on, at 0 until an event arrives, as NIXL's
// exporters pre-register them.
func writeSnapshot(w *sdk.Writer, s snapshot, host string, bounds []float64, statuses []bool) {
	cum := make([]uint64, 0, len(bounds))
	agents := 0
	for _, a := range s.agents {
		for _, r := range reasons {
			w.Counter(descReaderErrors, float64(a.errs[r]), a.name, r)
		}
		if !a.valid {
			continue
		}
		agents++
		st := a.stats
		for _, c := range agentCounters {
			w.Counter(c.desc, float64(st.sum[c.event]), host, a.name)
		}
		for i, status := range errorStatuses {
			if !statuses[i] {
				continue
			}
			w.Counter(descErrors, float64(st.sum[evErrFirst+eventType(i)]), host, a.name, status)
		}
		for _, g := range agentGauges {
			w.Gauge(g.desc, float64(st.last[g.event]), host, a.name)
		}
		cum = st.xfer.cumulative(cum)
		w.Histogram(descXferTimeHist, bounds, cum, st.xfer.count, float64(st.xfer.sum), host, a.name)
		cum = st.post.cumulative(cum)
		w.Histogram(descPostTimeHist, bounds, cum, st.post.count, float64(st.post.sum), host, a.name)
		w.Counter(descBufferFull, float64(a.full), a.name)
		w.Gauge(descBufferUnread, float64(a.unread), a.name)
		w.Gauge(descBufferCapacity, float64(a.capacity), a.name)
	}
	w.Gauge(descAgents, float64(agents))
	w.Counter(descExpired, float64(s.expired))
	for _, c := range errorCollectors {
		w.Counter(descCollectErrors, float64(s.errs[c]), c)
	}
}

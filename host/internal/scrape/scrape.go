// Package scrape answers one /metrics request: it fans Collect out to every
// running plugin in parallel, merges their batches through the guard, and
// adds the host's self-metrics, made from this very scrape's results.
package scrape

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"golang.org/x/sync/singleflight"

	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/merge"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/batch"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// hostPrefixes are reserved for the host's own families.
var hostPrefixes = []string{"plexporter_", "go_", "process_"}

// Scraper serves scrapes.
type Scraper struct {
	fleet  *fleet.Fleet
	filter *metricfilter.Filter
	opts   merge.Options
	log    *slog.Logger
	totals *counters
	reg    *prometheus.Registry // the host's own collectors: build, Go runtime, process

	flight singleflight.Group // concurrent scrapes of one selection
	mu     sync.Mutex
	logged map[string]bool // drop and error causes already logged
}

// New returns a Scraper. filter is the host allowlist/denylist, applied to
// plugin and host families alike.
func New(f *fleet.Fleet, filter *metricfilter.Filter, maxLabelValueLen int, log *slog.Logger) *Scraper {
	s := &Scraper{
		fleet:  f,
		filter: filter,
		opts:   merge.Options{Filter: filter, MaxLabelValueLen: maxLabelValueLen, ReservedPrefixes: hostPrefixes},
		log:    log,
		totals: newCounters(),
		reg:    prometheus.NewRegistry(),
		logged: map[string]bool{},
	}
	s.reg.MustRegister(
		versioncollector.NewCollector("plexporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return s
}

// Selection limits a scrape to some plugins (collect[] and exclude[]).
type Selection struct {
	Include, Exclude map[string]bool
}

func (sel Selection) wants(name string) bool {
	if len(sel.Include) > 0 && !sel.Include[name] {
		return false
	}
	return !sel.Exclude[name]
}

// Scrape collects from the selected plugins and returns the merged families.
//
// Scrapes that arrive while one with the same selection is in flight share
// its result (two Prometheus servers of an HA pair scrape at the same
// moment): plugins are asked once, merged once, and the self-metrics
// describe that one scrape. Scrapes of other selections run on their own
// and report their own. The shared work keeps the first caller's
// deadline but not its cancellation, so a client that hangs up does not cut
// the others short.
func (s *Scraper) Scrape(ctx context.Context, sel Selection) []*merge.Family {
	shared := context.WithoutCancel(ctx)
	cancel := context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		shared, cancel = context.WithDeadline(shared, dl)
	}
	defer cancel()
	// Always wait for the result: it is bounded by the deadline and the
	// plugins' timeouts, and a late plugin costs its series, not the scrape.
	v, _, _ := s.flight.Do(sel.key(), func() (any, error) { return s.scrape(shared, sel), nil })
	return v.([]*merge.Family)
}

// key identifies a selection for sharing scrapes.
func (sel Selection) key() string {
	names := func(m map[string]bool) string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	return names(sel.Include) + "\x00" + names(sel.Exclude)
}

func (s *Scraper) scrape(ctx context.Context, sel Selection) []*merge.Family {
	sups := s.fleet.Supervisors()
	var picked []*supervise.Supervisor
	for _, sup := range sups {
		if sel.wants(sup.Plugin().Name) {
			picked = append(picked, sup)
		}
	}
	results := make([]*supervise.Collection, len(picked))
	var wg sync.WaitGroup
	for i, sup := range picked {
		wg.Go(func() { results[i] = sup.Collect(ctx) })
	}
	wg.Wait()

	inputs := make([]merge.Input, len(picked))
	for i, sup := range picked {
		inputs[i] = merge.Input{Plugin: sup.Plugin().Name, Batches: results[i].Batches, MaxSeries: sup.Settings().MaxSeries}
	}
	res := merge.Merge(inputs, s.opts)
	s.logOnce(picked, results, res)
	return merge.Concat(s.hostFamilies(s.report(picked, results, res)), res.Families)
}

// report makes this scrape's self-metrics from its own results.
func (s *Scraper) report(picked []*supervise.Supervisor, results []*supervise.Collection, res *merge.Result) *report {
	r := &report{statuses: s.fleet.Statuses(), refused: s.fleet.Refused(), scraped: make(map[string]scrapeResult, len(picked))}
	for i, sup := range picked {
		name := sup.Plugin().Name
		r.scraped[name] = scrapeResult{seconds: results[i].Duration.Seconds(), success: results[i].Err == nil, series: res.Series[name]}
	}
	r.dropped, r.errors = s.totals.add(picked, results, res)
	return r
}

// hostFamilies gathers the host's collectors and this scrape's report
// through the same writer and guard as plugin samples. The report gets a
// registry of its own, made for this scrape, so no other scrape can write
// into it before it is gathered.
func (s *Scraper) hostFamilies(r *report) []*merge.Family {
	own := prometheus.NewRegistry()
	own.MustRegister(r)
	mfs, err := prometheus.Gatherers{s.reg, own}.Gather()
	if err != nil {
		s.log.Warn("self-metrics gather", "err", err)
	}
	var rec batch.Recorder
	w := sdk.NewWriter(nil, "", rec.Send)
	w.WriteFamilies(mfs)
	_ = w.Flush()
	opts := s.opts
	opts.ReservedPrefixes = nil
	return merge.Merge([]merge.Input{{Plugin: "plexporter", Batches: rec.Batches}}, opts).Families
}

// logOnce logs each distinct drop cause and plugin error once per process.
func (s *Scraper) logOnce(picked []*supervise.Supervisor, results []*supervise.Collection, res *merge.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cause := range res.Causes {
		key := k.Plugin + "\x00" + k.Reason + "\x00" + cause
		if !s.logged[key] {
			s.logged[key] = true
			s.log.Warn("dropping series (logged once per cause)", "plugin", k.Plugin, "reason", k.Reason, "example", cause)
		}
	}
	for i, r := range results {
		name := picked[i].Plugin().Name
		for _, e := range r.Errors {
			key := name + "\x00" + e.Collector + "\x00" + e.Message
			if !s.logged[key] {
				s.logged[key] = true
				s.log.Warn("plugin reported a partial error (logged once)", "plugin", name, "collector", e.Collector, "err", e.Message)
			}
		}
		if r.Err != nil {
			s.log.Debug("plugin collect failed", "plugin", name, "err", r.Err, "duration", r.Duration)
		}
	}
}

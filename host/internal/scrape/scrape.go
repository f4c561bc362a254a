// Package scrape answers one /metrics request: it fans Collect out to every
// running plugin in parallel, merges their batches through the guard, and
// adds the host's self-metrics, made from this very scrape's results.
package scrape

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// hostPrefixes are reserved for the host's own families (defined beside
// the guard, so sdktest applies the same list to a plugin's output).
var hostPrefixes = guard.HostPrefixes()

// Scraper serves scrapes.
type Scraper struct {
	fleet  *fleet.Fleet
	filter *metricfilter.Filter
	// healthFilter is filter's denylist alone, for the plexporter_*
	// families.
	healthFilter *metricfilter.Filter
	opts         guard.Options
	log          *slog.Logger
	totals       *counters
	reg          *prometheus.Registry // the host's own collectors: build, Go runtime, process
	// The Writers of those and of each scrape's report (hostFamilies).
	healthWriters, runtimeWriters writerPool

	mu     sync.Mutex
	rounds map[string]*round // rounds that take new scrapes, by selection (round.go)

	ownMu     sync.Mutex
	ownedBy   []ownerSource // what ownership was built from
	ownership *guard.Owners
	contested map[guard.Contested]bool // logged already

	logMu  sync.Mutex
	logged map[uint64]struct{} // hashes of the drop and error causes already logged
	seed   maphash.Seed
}

// New returns a Scraper. filter is the host allowlist/denylist, applied to
// plugin families and the Go runtime and process collectors'; the host's
// plexporter_* health families see only its denylist. devices selects
// plugin series by their device label (nil: all).
func New(f *fleet.Fleet, filter *metricfilter.Filter, devices *guard.DeviceFilter, maxLabelValueLen int, log *slog.Logger) *Scraper {
	health, err := metricfilter.New(nil, filter.Denied())
	if err != nil { // the same patterns filter accepted
		panic(err)
	}
	s := &Scraper{
		fleet:        f,
		filter:       filter,
		healthFilter: health,
		opts:         guard.Options{Filter: filter, Devices: devices, MaxLabelValueLen: maxLabelValueLen, ReservedPrefixes: hostPrefixes},
		log:          log,
		totals:       newCounters(),
		reg:          prometheus.NewRegistry(),
		rounds:       map[string]*round{},
		logged:       map[uint64]struct{}{},
		seed:         maphash.MakeSeed(),
		contested:    map[guard.Contested]bool{},
	}
	s.healthWriters.filter, s.runtimeWriters.filter = health, filter
	s.reg.MustRegister(
		versioncollector.NewCollector("plexporter"),
		collectors.NewGoCollector(),
		newProcessCollector(), // client_golang's process_* families, cheaper (process.go)
	)
	return s
}

// Register adds a collector of the host's own families (plexporter_*
// self-metrics, served with the others on every scrape).
func (s *Scraper) Register(c prometheus.Collector) error { return s.reg.Register(c) }

// Plugins returns the name of every plugin a scrape may select.
func (s *Scraper) Plugins() []string { return s.fleet.Known() }

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
// It waits for each plugin at most until ctx ends and leaves the plugins
// that had not answered by then out. Scrapes of the same selection that
// overlap share the plugins' answers and, when they saw the same plugins
// answer, one merge (round.go); each still leaves by its own deadline, and
// its self-metrics say what it waited for each plugin. A client that hangs
// up leaves the round; the others go on.
func (s *Scraper) Scrape(ctx context.Context, sel Selection) []*guard.Family {
	arrived := time.Now()
	r := s.join(sel)
	defer s.leave(r)
	got := r.wait(ctx)
	left := time.Now()
	m := r.merged(got, func(m *sharedMerge) { s.merge(r, got, m) })
	return guard.Concat(s.hostFamilies(s.report(r, got, m, arrived, left)), m.res.Families)
}

// join returns the round of sel that takes new scrapes, or starts one.
func (s *Scraper) join(sel Selection) *round {
	key := sel.key()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rounds[key]
	if r == nil {
		var picked []*supervise.Supervisor
		for _, sup := range s.fleet.Supervisors() {
			if sel.wants(sup.Plugin().Name) {
				picked = append(picked, sup)
			}
		}
		r = startRound(key, picked, s.close)
		if len(picked) > 0 {
			s.rounds[key] = r
		}
	}
	r.members++
	return r
}

// leave takes a scrape out of its round; the last one out closes the round
// to new scrapes and stops its waits (the plugins' Collects go on under
// their own timeouts, for whoever asks next).
func (s *Scraper) leave(r *round) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.members--; r.members == 0 {
		s.closeLocked(r)
		r.cancel()
	}
}

// close stops r from taking new scrapes: every plugin answered.
func (s *Scraper) close(r *round) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(r)
}

func (s *Scraper) closeLocked(r *round) {
	if s.rounds[r.key] == r {
		delete(s.rounds, r.key)
	}
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

// merge merges the answers got holds into m, counts what the guard dropped
// and the plugins' partial errors, and keeps the totals for the scrapes
// that share m.
func (s *Scraper) merge(r *round, got []bool, m *sharedMerge) {
	var inputs []guard.Input
	var names []string
	var colls []*supervise.Collection
	for i, sup := range r.picked {
		if !got[i] {
			continue
		}
		a := &r.answers[i]
		name := sup.Plugin().Name
		inputs = append(inputs, guard.Input{Plugin: name, Batches: a.coll.Batches, MaxSeries: sup.Settings().MaxSeries, SelectedBy: sup.SelectedBy()})
		names, colls = append(names, name), append(colls, a.coll)
		a.counted.Do(func() { s.totals.addErrors(name, a.coll.Errors, a.coll.ErrorsDropped) })
	}
	opts := s.opts
	opts.Owners = s.owners()
	m.res = guard.Merge(inputs, opts)
	m.dropped, m.errors, m.errorsDropped = s.totals.addDrops(m.res)
	s.logOnce(names, colls, m.res)
}

// ownerSource is one plugin's catalogue as ownership saw it.
type ownerSource struct {
	plugin, prefix string
	info           *pluginv1.InfoResponse
}

// owners returns the owners of the families every known plugin's
// catalogue declares (all of them, not only the selected: a scrape of the
// offender alone must not show the family it takes). It is built again
// only when a plugin's Info or prefix changed; contested declarations are
// logged then.
func (s *Scraper) owners() *guard.Owners {
	var src []ownerSource
	for _, sup := range s.fleet.Supervisors() {
		if info := sup.Info(); info != nil { // not Status: no cgroup reads
			src = append(src, ownerSource{sup.Plugin().Name, sup.Settings().MetricPrefix, info})
		}
	}
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	if s.ownership != nil && slices.Equal(src, s.ownedBy) {
		return s.ownership
	}
	cats := make([]guard.Catalogue, len(src))
	for i, c := range src {
		cats[i] = guard.Catalogue{Plugin: c.plugin, Prefix: c.prefix, Families: c.info.GetMetrics()}
	}
	o, contested := guard.NewOwners(cats)
	logged := 0
	for _, c := range contested {
		if s.contested[c] || logged == 10 || len(s.contested) >= maxLogged {
			continue
		}
		s.contested[c] = true
		logged++
		s.log.Warn("two plugins' catalogues declare the same family without marking it shared; it belongs to the first by name, the other's series of it are dropped (foreign_family)",
			"family", c.Family, "owner", c.Owner, "other", c.Other)
	}
	s.ownership, s.ownedBy = o, src
	return o
}

// report makes one scrape's self-metrics: the fleet as it is now, what this
// scrape waited for each plugin and got from it, and the totals of the
// merge it shares.
func (s *Scraper) report(r *round, got []bool, m *sharedMerge, arrived, left time.Time) *report {
	rep := &report{statuses: s.fleet.Statuses(), refused: s.fleet.Refused(), reload: s.fleet.LastReload(), scraped: make(map[string]scrapeResult, len(r.picked)), dropped: m.dropped, errors: m.errors, errorsDropped: m.errorsDropped}
	for i, sup := range r.picked {
		name := sup.Plugin().Name
		res := scrapeResult{seconds: r.waited(i, got[i], arrived, left).Seconds()}
		if got[i] {
			res.success = r.answers[i].coll.Err == nil
			res.series = m.res.Series[name]
		}
		rep.scraped[name] = res
	}
	return rep
}

// hostFamilies writes the host's collectors and this scrape's report
// through the same writer and guard as plugin samples. The report writes
// its families itself, from this scrape's own data, so no other scrape can
// write into them; the runtime families are client_golang's. The filters
// apply as the Writers write (as a plugin's allowlist does), so one merge
// guards both.
func (s *Scraper) hostFamilies(r *report) []*guard.Family {
	mfs, err := s.reg.Gather()
	if err != nil {
		s.log.Warn("self-metrics gather", "err", err)
	}
	// The allowlist selects plugin metrics; it never hides the host's own
	// health families (an allowlist of rdma_* must not take
	// plexporter_plugin_up with it). The denylist, named explicitly, does.
	var health, runtime []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), healthPrefix) {
			health = append(health, mf)
		} else {
			runtime = append(runtime, mf)
		}
	}
	var rec wire.Recorder
	s.healthWriters.write(rec.Send, func(w *selfWriter) {
		r.write(w)
		w.families(health)
	})
	s.runtimeWriters.write(rec.Send, func(w *selfWriter) { w.families(runtime) })
	opts := s.opts
	opts.ReservedPrefixes = nil
	opts.Filter = nil // applied by the Writers
	return guard.Merge([]guard.Input{{Plugin: "plexporter", Batches: rec.Batches}}, opts).Families
}

// writerPool keeps the writers of the host's own families from scrape to
// scrape (about 17 kB of tables and maps each, two a scrape). A flushed
// writer holds nothing the merge uses: the batches it sent are the
// Recorder's. A pooled writer still names the last scrape's chunks until
// it is restarted for the next: a few kB, and the pool lets go of it at
// the next collections.
type writerPool struct {
	filter *metricfilter.Filter
	pool   sync.Pool
}

// write runs fill on a writer of the pool's filter that sends to send,
// then flushes it.
func (p *writerPool) write(send func(*pluginv1.CollectResponse) error, fill func(*selfWriter)) {
	w, ok := p.pool.Get().(*selfWriter)
	if ok {
		w.enc.Restart(send)
	} else {
		// No recycling: the Recorder keeps the batches sent.
		w = &selfWriter{enc: wire.NewEncoder(0, false, send), filter: p.filter, enabled: map[*wire.Header]bool{}}
	}
	fill(w)
	_ = w.enc.Flush() // the Recorder's Send never fails
	p.pool.Put(w)
}

// selfWriter writes the host's own families straight into batches with
// the wire format's encoder, applying its filter once per family as a
// plugin's Writer applies the allowlist.
type selfWriter struct {
	enc     *wire.Encoder
	filter  *metricfilter.Filter
	enabled map[*wire.Header]bool // the filter's answers for the report's families
}

// value writes one sample of family h (a counter or a gauge).
func (w *selfWriter) value(h *wire.Header, v float64, lv ...string) {
	on, ok := w.enabled[h]
	if !ok {
		on = w.filter.Allow(h.Name)
		w.enabled[h] = on
	}
	if !on || w.enc.SendErr() != nil {
		return
	}
	if len(lv) != len(h.Labels) { // a mistake in this package
		w.enc.Error("host", fmt.Sprintf("family %s has %d label names but a sample has %d values", h.Name, len(h.Labels), len(lv)))
		return
	}
	w.enc.AddValue(w.enc.Open(h, nil, false), lv, v)
}

// families writes client_golang's families.
func (w *selfWriter) families(mfs []*dto.MetricFamily) {
	wire.WriteFamilies(w.enc, mfs, "", w.filter.Allow)
}

// healthPrefix starts the host's own health families.
const healthPrefix = "plexporter_"

// maxLogged bounds the set of causes already logged: causes and error
// messages come from plugins, and a plugin inventing a new message on every
// scrape must not grow the host without end. The set holds 64-bit hashes,
// not the messages, so it is bounded in bytes whatever their length (a
// 4 MiB message costs 8 bytes); when it is full it is forgotten, so a
// cause may be logged again — bounded repetition instead of unbounded
// memory. (Two causes with the same hash would log only the first: one
// chance in 2^64.)
const maxLogged = 4096

// maxErrorLines is the number of partial errors logged per plugin and
// merge; a plugin making up new messages on every collect costs at most
// that many lines (of at most wire.MaxErrorLen) per scrape.
const maxErrorLines = 10

// logOnce logs each distinct drop cause and plugin error once per process.
func (s *Scraper) logOnce(names []string, results []*supervise.Collection, res *guard.Result) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	first := func(parts ...string) bool {
		var h maphash.Hash
		h.SetSeed(s.seed)
		for _, p := range parts {
			h.WriteString(p)
			h.WriteByte(0)
		}
		k := h.Sum64()
		if _, ok := s.logged[k]; ok {
			return false
		}
		if len(s.logged) >= maxLogged {
			clear(s.logged)
		}
		s.logged[k] = struct{}{}
		return true
	}
	for k, cause := range res.Causes {
		if first(k.Plugin, k.Reason, cause) {
			s.log.Warn("dropping series (logged once per cause)", "plugin", k.Plugin, "reason", k.Reason, "example", cause)
		}
	}
	for i, r := range results {
		name := names[i]
		lines, unlogged := 0, 0
		for _, e := range r.Errors {
			if !first(name, e.Collector, e.Message) {
				continue
			}
			if lines == maxErrorLines {
				unlogged++
				continue
			}
			lines++
			s.log.Warn("plugin reported a partial error (logged once)", "plugin", name, "collector", e.Collector, "err", e.Message)
		}
		// At most once a minute per plugin.
		if (unlogged > 0 || r.ErrorsDropped > 0) && first(name, "\x00budget", strconv.FormatInt(time.Now().Unix()/60, 10)) {
			s.log.Warn("plugin reported more partial errors than the host logs or keeps; all kept are counted in plexporter_plugin_collect_errors_total, the discarded in plexporter_plugin_collect_errors_dropped_total", "plugin", name, "not_logged", unlogged, "discarded", r.ErrorsDropped)
		}
		if r.Err != nil {
			s.log.Debug("plugin collect failed", "plugin", name, "err", r.Err, "duration", r.Duration)
		}
	}
}

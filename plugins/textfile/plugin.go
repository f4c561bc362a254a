package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/sdk"
)

// plugin serves the textfiles of the configured directories.
type plugin struct {
	now func() time.Time // time.Now; tests replace it

	mu     sync.Mutex // one collect at a time: the file cache and counters are shared
	cfg    config
	prefix string // the host's metric_prefix, for the reserved-prefix check
	files  map[string]*fileState
	// descs holds one Desc per family name for as long as a file has the
	// family: the Writer remembers the allowlist's answer per Desc, so a
	// new Desc per scrape would grow it without bound. Type, help and
	// labels are set again at every collect.
	descs map[string]*sdk.Desc
	// dedups are the series of a family repeated in later files, kept
	// while the family's files are unchanged (dedup).
	dedups map[string]*dedup

	errs          sdk.CollectionErrors // textfile_collection_errors_total
	filesRefused  map[string]float64   // by reason
	seriesRefused map[string]float64   // by reason
	held, parses  float64
}

// fileState is what the plugin remembers of one file between scrapes.
type fileState struct {
	good *parsed // the last version that parsed
	// bad is the version that did not parse (badErr), if the current one
	// did not; held says it has been served from good once already.
	bad    fileKey
	badErr error
	hasBad bool
	held   bool
	seen   bool // in this scrape's listing
}

func newPlugin() *plugin {
	return &plugin{
		now:           time.Now,
		cfg:           defaultConfig(),
		files:         map[string]*fileState{},
		descs:         map[string]*sdk.Desc{},
		dedups:        map[string]*dedup{},
		filesRefused:  map[string]float64{},
		seriesRefused: map[string]float64{},
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "textfile",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{defaultDirectory}},
	}
}

func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	for _, dir := range c.Directories {
		// Not an error: a directory may be created after the plugin
		// starts, and a 777 one can be fixed; every scrape reports it.
		if _, err := checkDirectory(dir); err != nil {
			cfg.Warn("directories: %v", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg, p.prefix = c, cfg.MetricPrefix
	return nil
}

// source is one file whose samples this scrape serves.
type source struct {
	path string
	p    *parsed
}

// scrape is one collect's state.
type scrape struct {
	w       *sdk.Writer
	failed  bool
	sources []source
	mtimes  []source // the files whose mtime is exported (p.key.mtime)
}

// fail counts and reports a failure; the scrape's error gauge shows it.
func (p *plugin) fail(s *scrape, collector string, err error) {
	s.failed = true
	p.errs.Fail(s.w, collector, err)
}

// refuseFile reports a file left out, with its reason.
func (p *plugin) refuseFile(s *scrape, err error) {
	reason := fileRefusedParse
	var re *refuseError
	if errors.As(err, &re) {
		reason = re.reason
	}
	p.filesRefused[reason]++
	p.fail(s, collectorFile, err)
}

// refuseSeries reports series of a read file left out.
func (p *plugin) refuseSeries(s *scrape, reason string, n int, err error) {
	p.seriesRefused[reason] += float64(n)
	p.fail(s, collectorMerge, err)
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &scrape{w: w}
	for _, st := range p.files {
		st.seen = false
	}
	var err error
	for _, dir := range p.cfg.Directories {
		if err = p.readDirectory(ctx, s, dir); err != nil {
			break
		}
	}
	for path, st := range p.files {
		if !st.seen {
			delete(p.files, path)
		}
	}
	if err == nil {
		p.writeFamilies(s)
	}
	p.writeOwn(s)
	return err
}

// readDirectory reads the *.prom files of one directory in name order.
func (p *plugin) readDirectory(ctx context.Context, s *scrape, dir string) error {
	real, err := checkDirectory(dir)
	if err != nil {
		p.fail(s, collectorDirectory, err)
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		p.fail(s, collectorDirectory, err)
		// ReadDir returns what it read before the error.
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".prom") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.readOne(s, filepath.Join(dir, e.Name()), real)
	}
	return nil
}

// readOne decides what one file contributes: its cached parse when its
// size and mtime are unchanged, a new parse, its last good parse held
// for one scrape while it is incomplete, or nothing.
func (p *plugin) readOne(s *scrape, path, real string) {
	st := p.files[path]
	if st == nil {
		st = &fileState{}
		p.files[path] = st
	}
	st.seen = true
	target, fi, err := statFile(path, real, p.cfg.MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return // removed since the listing: the file is gone, not broken
	}
	if err != nil {
		p.refuseFile(s, err)
		return
	}
	key := fileKey{fi.Size(), fi.ModTime()}
	var cur *parsed
	switch {
	case st.good != nil && st.good.key == key:
		cur = st.good
	case st.hasBad && st.bad == key:
		err = st.badErr
	default:
		data, fi, rerr := readFile(path, target, p.cfg.MaxFileBytes)
		if errors.Is(rerr, fs.ErrNotExist) {
			return
		}
		if rerr != nil {
			p.refuseFile(s, rerr)
			return
		}
		key = fileKey{fi.Size(), fi.ModTime()}
		p.parses++
		cur, err = parse(path, data, p.cfg.MaxSeriesPerFile)
		if err == nil {
			cur.key = key
			st.good, st.hasBad, st.held = cur, false, false
		} else {
			st.bad, st.badErr, st.hasBad, st.held = key, err, true, false
		}
	}
	if cur == nil {
		var incomplete *incompleteError
		if errors.As(err, &incomplete) && st.good != nil && !st.held {
			st.held = true
			p.held++
			cur = st.good
		} else {
			p.refuseFile(s, err)
			return
		}
	}
	s.mtimes = append(s.mtimes, source{path, cur})
	if age := p.cfg.MaxAge.Duration; age > 0 && p.now().Sub(cur.key.mtime) > age {
		p.filesRefused[fileRefusedMaxAge]++
		return
	}
	s.sources = append(s.sources, source{path, cur})
}

// merged is one family over every file that has it.
type merged struct {
	name   string
	typ    sdk.Type
	help   string // the first file's with a HELP line
	files  []string
	parts  []source
	fams   []*family
	labels []string
}

// writeFamilies merges the files' families as the host's guard merges
// plugins: the first file (directories in order, files by name) to expose
// a family sets its type and help, and the first to expose a series keeps
// it; what conflicts is refused and counted, never the scrape.
func (p *plugin) writeFamilies(s *scrape) {
	byName := map[string]*merged{}
	claims := map[string]string{} // series name → family
	total := 0
	for _, src := range s.sources {
		for _, r := range src.p.refused {
			p.refuseSeries(s, r.reason, r.series, r.err)
		}
		for _, f := range src.p.families {
			exposed := p.prefix + f.name
			if prefix, ok := reserved(exposed); ok {
				p.refuseSeries(s, seriesRefusedReserved, f.series, fmt.Errorf("%s: family %s: the prefix %s is reserved for the host's own metrics, refused", src.path, exposed, prefix))
				continue
			}
			m := byName[f.name]
			if m == nil {
				if other := collision(claims, f); other != "" {
					p.refuseSeries(s, seriesRefusedConflict, f.series, fmt.Errorf("%s: family %s (%s) would expose %s, refused", src.path, f.name, f.typ, other))
					continue
				}
			} else if m.typ != f.typ {
				p.refuseSeries(s, seriesRefusedConflict, f.series, fmt.Errorf("%s: family %s is a %s, but %s has it as a %s first; refused", src.path, f.name, f.typ, m.files[0], m.typ))
				continue
			} else if f.help != "" && m.help != "" && f.help != m.help {
				p.refuseSeries(s, seriesRefusedConflict, f.series, fmt.Errorf("%s: family %s has help %q, but %s has %q first; refused", src.path, f.name, f.help, m.files[0], m.help))
				continue
			}
			if total+f.series > p.cfg.MaxSeries {
				p.refuseSeries(s, seriesRefusedTotalLimit, f.series, fmt.Errorf("%s: family %s (%d series) is past max_series (%d), refused", src.path, f.name, f.series, p.cfg.MaxSeries))
				continue
			}
			total += f.series
			if m == nil {
				m = &merged{name: f.name, typ: f.typ}
				byName[f.name] = m
				for _, n := range seriesNames(f.name, f.typ) {
					claims[n] = f.name
				}
			}
			if m.help == "" {
				m.help = f.help
			}
			m.files = append(m.files, src.path)
			m.parts = append(m.parts, src)
			m.fams = append(m.fams, f)
			for _, l := range f.labels {
				if !slices.Contains(m.labels, l) {
					m.labels = append(m.labels, l)
				}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for n := range p.descs {
		if byName[n] == nil {
			delete(p.descs, n)
			delete(p.dedups, n)
		}
	}
	wr := writer{w: s.w}
	served := 0
	for _, n := range names {
		m := byName[n]
		slices.Sort(m.labels)
		help := m.help
		if help == "" {
			// node_exporter's help for a family no file describes.
			help = "Metric read from " + strings.Join(m.files, ", ")
		}
		d := p.descs[n]
		if d == nil {
			d = &sdk.Desc{Name: n}
			p.descs[n] = d
		}
		d.Type, d.Help = m.typ, help
		if !slices.Equal(d.Labels, m.labels) {
			d.Labels = m.labels
		}
		dd := p.dedup(n, m.fams)
		for i, f := range m.fams {
			var skip map[int]bool
			if dd != nil {
				skip = dd.skip[i]
			}
			for j, metric := range f.metrics {
				if skip[j] {
					continue
				}
				served += seriesOf(f.typ, metric)
				wr.write(d, metric, m.labels)
			}
			if len(skip) > 0 {
				p.refuseSeries(s, seriesRefusedDuplicate, len(skip), fmt.Errorf("%s: family %s: %d series already exposed by an earlier file, refused", m.parts[i].path, n, len(skip)))
			}
		}
	}
	s.w.Gauge(descSeries, float64(served))
}

// writeOwn writes the plugin's own families.
func (p *plugin) writeOwn(s *scrape) {
	for _, src := range s.mtimes {
		s.w.Gauge(descMtime, float64(src.p.key.mtime.UnixNano())/1e9, src.path)
	}
	failed := 0.0
	if s.failed {
		failed = 1
	}
	s.w.Gauge(descScrapeError, failed)
	p.errs.Write(s.w, descCollectionErrors, errorCollectors...)
	for _, r := range fileReasons {
		s.w.Counter(descFilesRefused, p.filesRefused[r], r)
	}
	for _, r := range seriesReasons {
		s.w.Counter(descSeriesRefused, p.seriesRefused[r], r)
	}
	s.w.Counter(descHeld, p.held)
	s.w.Counter(descParses, p.parses)
}

// reserved tells whether an exposed family name starts with a prefix the
// host keeps for its own metrics.
func reserved(name string) (string, bool) {
	for _, prefix := range guard.HostPrefixes() {
		if strings.HasPrefix(name, prefix) {
			return prefix, true
		}
	}
	return "", false
}

// seriesNames are the names a family takes in the text format and
// OpenMetrics, as the host's guard counts them: no two families may share
// one.
func seriesNames(name string, t sdk.Type) []string {
	switch t {
	case sdk.Counter:
		if base, ok := strings.CutSuffix(name, "_total"); ok {
			return []string{name, base + "_created"}
		}
		return []string{name, name + "_total", name + "_created"}
	case sdk.Histogram:
		return []string{name, name + "_bucket", name + "_sum", name + "_count", name + "_created"}
	case sdk.Summary:
		return []string{name, name + "_sum", name + "_count", name + "_created"}
	}
	return []string{name}
}

// collision names the first series name of f that an earlier family
// takes, or "".
func collision(claims map[string]string, f *family) string {
	for _, n := range seriesNames(f.name, f.typ) {
		if other, ok := claims[n]; ok {
			return fmt.Sprintf("%s, a series name of family %s", n, other)
		}
	}
	return ""
}

// writer turns parsed metrics into samples, reusing its buffers.
type writer struct {
	w        *sdk.Writer
	lv       []string
	bounds   []float64
	counts   []uint64
	quantile []float64
	values   []float64
}

// write writes one metric with its labels padded to the family's union
// (a label a series lacks is empty, as node_exporter pads it).
func (wr *writer) write(d *sdk.Desc, m *dto.Metric, labels []string) {
	wr.lv = wr.lv[:0]
	pairs := m.GetLabel()
	j := 0
	for _, name := range labels {
		for j < len(pairs) && pairs[j].GetName() < name {
			j++
		}
		v := ""
		if j < len(pairs) && pairs[j].GetName() == name {
			v = pairs[j].GetValue()
		}
		wr.lv = append(wr.lv, v)
	}
	switch d.Type {
	case sdk.Counter:
		wr.w.Counter(d, m.GetCounter().GetValue(), wr.lv...)
	case sdk.Gauge:
		wr.w.Gauge(d, m.GetGauge().GetValue(), wr.lv...)
	case sdk.Untyped:
		wr.w.Untyped(d, m.GetUntyped().GetValue(), wr.lv...)
	case sdk.Histogram:
		h := m.GetHistogram()
		wr.bounds, wr.counts = wr.bounds[:0], wr.counts[:0]
		for _, b := range h.GetBucket() {
			if hasInf([]*dto.Bucket{b}) {
				continue // the +Inf bucket is the count
			}
			wr.bounds = append(wr.bounds, b.GetUpperBound())
			wr.counts = append(wr.counts, b.GetCumulativeCount())
		}
		wr.w.Histogram(d, wr.bounds, wr.counts, h.GetSampleCount(), h.GetSampleSum(), wr.lv...)
	case sdk.Summary:
		sm := m.GetSummary()
		wr.quantile, wr.values = wr.quantile[:0], wr.values[:0]
		for _, q := range sm.GetQuantile() {
			wr.quantile = append(wr.quantile, q.GetQuantile())
			wr.values = append(wr.values, q.GetValue())
		}
		wr.w.Summary(d, wr.quantile, wr.values, sm.GetSampleCount(), sm.GetSampleSum(), wr.lv...)
	}
}

// dedup is which series of a family's later files repeat an earlier
// file's: skip[i] holds the indexes of fams[i]'s metrics to leave out.
type dedup struct {
	fams []*family
	skip []map[int]bool
}

// dedup returns the repeated series of a family over fams (the parsed
// versions of the files that have it, in order), computing them only when
// one of those files changed: an unchanged scrape does no map work per
// series. It returns nil for a family of one file (whose own repeats
// parse already removed).
func (p *plugin) dedup(name string, fams []*family) *dedup {
	if len(fams) < 2 {
		delete(p.dedups, name)
		return nil
	}
	if d := p.dedups[name]; d != nil && slices.Equal(d.fams, fams) {
		return d
	}
	d := &dedup{fams: slices.Clone(fams), skip: make([]map[int]bool, len(fams))}
	n := 0
	for _, f := range fams {
		n += len(f.keys)
	}
	seen := make(map[string]struct{}, n)
	for i, f := range fams {
		for j, k := range f.keys {
			if _, ok := seen[k]; ok {
				if d.skip[i] == nil {
					d.skip[i] = map[int]bool{}
				}
				d.skip[i][j] = true
				continue
			}
			seen[k] = struct{}{}
		}
	}
	p.dedups[name] = d
	return d
}

// Package guard joins the batches of every plugin into one set of metric
// families and guards the exposition: allowlist, name and UTF-8 validation,
// limits on names, help texts and labels, histogram and summary shapes,
// metadata conflicts, series names colliding between families, duplicate
// series, and a per-plugin series cap and byte budget. Nothing a plugin
// sends can make the merged result invalid; every drop is counted per plugin
// and reason.
package guard

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// Drop reasons, the values of the reason label of
// plexporter_dropped_series_total. Drops are counted in samples: a
// histogram sample dropped is one drop, whatever its bucket count.
const (
	// The chunk's shape is broken (column lengths, string indexes, unknown
	// type), or its help or unit is not valid UTF-8 or longer than MaxHelpLen
	// or MaxNameLen.
	ReasonMalformed = "malformed"
	// A metric or label name is not a legacy Prometheus name, is longer than
	// MaxNameLen, is reserved ("__" prefix, "le" in a histogram, "quantile"
	// in a summary) or given twice.
	ReasonInvalidName = "invalid_name"
	// A label value is not valid UTF-8 or is longer than MaxLabelValueLen.
	ReasonInvalidValue = "invalid_label_value"
	// The family has more than MaxLabels label names.
	ReasonLabelLimit = "label_limit"
	// A histogram's bounds are not strictly ascending or include NaN or +Inf
	// (its whole chunk), or a sample's cumulative counts decrease or exceed
	// its count (that sample), or a sample's native histogram breaks a rule
	// of checkNative (that sample).
	ReasonInvalidHistogram = "invalid_histogram"
	// A summary's quantiles are NaN, outside [0, 1] or repeated (its chunk).
	ReasonInvalidSummary = "invalid_summary"
	// The family is already exposed with another type, help, unit or label
	// names, or uses a prefix reserved for the host.
	ReasonConflict = "conflict"
	// A series name the family exposes in the text format or OpenMetrics is
	// one an earlier family uses (see seriesNames).
	ReasonNameCollision = "name_collision"
	// The identical series is already exposed.
	ReasonDuplicate = "duplicate"
	// (ReasonForeignFamily, in owners.go: the family belongs to another
	// plugin.)
	// The plugin went past its series cap, or its batches past the byte
	// budget that comes with the cap (internal/wire.LimitsFor).
	ReasonSeriesLimit = "series_limit"
)

// Limits on what one family may carry. Prometheus itself sets none; these
// bound the cost of a hostile plugin per family, and sit above what any real
// exporter writes (and at what remote-write receivers commonly accept for
// names, 1024 bytes).
const (
	MaxNameLen = 1024 // metric and label names, and units, in bytes
	MaxHelpLen = 4096 // help text, in bytes
	MaxLabels  = 64   // label names per family (le and quantile not counted)
)

// DefaultMaxLabelValueLen is the host's default for Options.MaxLabelValueLen
// (--plugin.max-label-length): sdktest guards a plugin's output with it, so
// a plugin's own test sees what a default host drops.
const DefaultMaxLabelValueLen = 4096

// HostPrefixes returns the family-name prefixes of the host's own metrics
// (plexporter_*, the Go runtime's and the process collector's): the
// ReservedPrefixes the host passes for plugin output.
func HostPrefixes() []string { return []string{"plexporter_", "go_", "process_"} }

// Input is one plugin's collect.
type Input struct {
	Plugin  string
	Batches []*pluginv1.Batch
	// MaxSeries caps the series this plugin may contribute (0: no cap).
	MaxSeries int
	// SelectedBy maps a family name to the further names the allowlist
	// selects it by (its catalogue's selected_by, as exposed); nil: none.
	SelectedBy map[string][]string
}

// Options apply to every input.
type Options struct {
	Filter *metricfilter.Filter
	// Devices selects series by their device label (nil: all).
	Devices *DeviceFilter
	// MaxLabelValueLen drops samples with a longer label value (0: no limit).
	MaxLabelValueLen int
	// ReservedPrefixes are family-name prefixes only the host may use (its
	// self-metrics); plugin families with them are dropped as conflicts.
	ReservedPrefixes []string
	// Owners, when set, keeps each family a catalogue declares to its
	// owner: another plugin's chunks of it are dropped (ReasonForeignFamily).
	Owners *Owners
	// Observe, when set, is told of every drop with its own cause, where
	// Result.Causes keeps one example per plugin and reason: sdktest lists
	// them all to the plugin's author. The host leaves it nil (a hostile
	// plugin's drops must cost a counter, not a formatted message each).
	Observe func(k DropKey, samples int, cause string)
}

// Family is one merged metric family.
type Family struct {
	Name       string
	Type       pluginv1.MetricType
	Help       string
	Unit       string
	LabelNames []string
	Plugin     string // the plugin that introduced it
	Parts      []Part

	seen     seenSet
	overflow map[string]struct{}
	// collides says which series names this family would share, and with
	// which earlier family; such a family is never exposed
	// (ReasonNameCollision).
	collides string
}

// Part is one chunk's contribution to a family.
type Part struct {
	// Chunk reads the plugin's chunk; the merge has checked its shape.
	Chunk wire.Chunk
	// Keep lists the sample indexes exposed, in order; nil means all of them.
	Keep []int32
}

// Samples returns the number of exposed samples of the part.
func (p *Part) Samples() int {
	if p.Keep != nil {
		return len(p.Keep)
	}
	return p.Chunk.Len()
}

// Index returns the chunk index of the i-th exposed sample.
func (p *Part) Index(i int) int {
	if p.Keep != nil {
		return int(p.Keep[i])
	}
	return i
}

type ref struct{ part, sample int32 }

// DropKey identifies a counter of dropped series.
type DropKey struct{ Plugin, Reason string }

// Result is a merged scrape.
type Result struct {
	Families []*Family // sorted by name
	// Series counts the exposed series per plugin (a histogram counts its
	// buckets, +Inf, sum and count, like Prometheus does).
	Series map[string]int
	Drops  map[DropKey]int
	// DeviceFiltered counts, per plugin, the series Options.Devices removed
	// (not drops: the operator asked for it).
	DeviceFiltered map[string]int
	// Causes holds one human-readable example per drop key, for logging.
	Causes map[DropKey]string
}

// Merge joins inputs in the given order; on conflicts and duplicates the
// earlier input wins, so callers pass plugins sorted by name.
func Merge(inputs []Input, opts Options) *Result {
	m := merger{
		opts: opts,
		res: &Result{
			Series:         make(map[string]int, len(inputs)),
			Drops:          map[DropKey]int{},
			DeviceFiltered: map[string]int{},
			Causes:         map[DropKey]string{},
		},
		byName:   map[string]*Family{},
		claims:   map[string]string{},
		sizeHint: map[string]int{},
		seed:     maphash.MakeSeed(),
	}
	// Size each family's duplicate index once: a family split over many
	// batches would otherwise rehash its map several times.
	for _, in := range inputs {
		for _, b := range in.Batches {
			for _, c := range b.GetFamilies() {
				if int(c.GetName()) < len(b.GetStrings()) {
					m.sizeHint[wire.TableString(b.Strings[c.Name])] += len(c.Values)
				}
			}
		}
	}
	for _, in := range inputs {
		m.input(in)
	}
	fams := make([]*Family, 0, len(m.byName))
	for _, f := range m.byName {
		f.seen.release()
		f.overflow = nil
		if len(f.Parts) > 0 {
			fams = append(fams, f)
		}
	}
	slices.SortFunc(fams, func(a, b *Family) int { return strings.Compare(a.Name, b.Name) })
	m.res.Families = fams
	return m.res
}

type merger struct {
	opts     Options
	res      *Result
	byName   map[string]*Family
	claims   map[string]string // series name -> the family that uses it
	sizeHint map[string]int    // samples per family name over all inputs
	seed     maphash.Seed
	// Owners.foreign's answers, once per family, type and plugin
	owned map[ownKey]string
	// per batch: 1 = valid label value, 2 = invalid; 0 = not yet checked
	valid []uint8
	// per batch: the seeded hash of each string found valid (valid 1),
	// which the duplicate index combines per series
	hashes []uint64
	// per batch: 1 = device allowed by Options.Devices, 2 = filtered; 0 = not yet checked
	devices []uint8
}

// maxCause is the longest cause kept for the log: a cause quotes what the
// plugin sent, which may be a megabyte of garbage.
const maxCause = 512

func (m *merger) drop(plugin, reason string, n int, cause string) {
	if n <= 0 {
		return
	}
	k := DropKey{plugin, reason}
	m.res.Drops[k] += n
	if _, ok := m.res.Causes[k]; !ok {
		m.setCause(k, cause)
	}
	if m.opts.Observe != nil {
		m.opts.Observe(k, n, cause)
	}
}

// dropSample counts one dropped sample. cause runs only for the first drop
// of its plugin and reason: formatting a cause for every sample was a large
// part of merging a plugin that repeats its series.
func (m *merger) dropSample(plugin, reason string, cause func() string) {
	k := DropKey{plugin, reason}
	m.res.Drops[k]++
	if _, ok := m.res.Causes[k]; !ok {
		m.setCause(k, cause())
	}
	if m.opts.Observe != nil {
		m.opts.Observe(k, 1, cause())
	}
}

type ownKey struct {
	name, plugin string
	t            pluginv1.MetricType
}

// foreign is Options.Owners.foreign, remembered for the merge.
func (m *merger) foreign(name string, t pluginv1.MetricType, plugin string) string {
	if m.opts.Owners == nil || len(m.opts.Owners.names) == 0 {
		return ""
	}
	k := ownKey{name, plugin, t}
	why, ok := m.owned[k]
	if !ok {
		if m.owned == nil {
			m.owned = map[ownKey]string{}
		}
		why = m.opts.Owners.foreign(name, t, plugin)
		m.owned[k] = why
	}
	return why
}

func (m *merger) setCause(k DropKey, cause string) {
	if len(cause) > maxCause {
		cause = strings.ToValidUTF8(cause[:maxCause], "") + "…"
	}
	m.res.Causes[k] = cause
}

func (m *merger) input(in Input) {
	series, bytes := 0, 0
	lim := wire.LimitsFor(in.MaxSeries)
	for bi, b := range in.Batches {
		// The byte budget, as internal/wire.Drain applies it: the batch
		// that crosses it is the last one received, and it is not exposed.
		if bytes += wire.Size(b); lim.MaxBytes > 0 && bytes > lim.MaxBytes {
			m.overBudget(in, in.Batches[bi:], lim.MaxBytes)
			break
		}
		m.valid = slices.Grow(m.valid[:0], len(b.GetStrings()))[:len(b.GetStrings())]
		clear(m.valid)
		m.hashes = slices.Grow(m.hashes[:0], len(b.GetStrings()))[:len(b.GetStrings())]
		if m.opts.Devices.active() {
			m.devices = slices.Grow(m.devices[:0], len(b.GetStrings()))[:len(b.GetStrings())]
			clear(m.devices)
		}
		for _, c := range b.GetFamilies() {
			series = m.chunk(in, b, c, series)
		}
	}
	m.res.Series[in.Plugin] = series
}

// SelectedBy maps the families of a plugin's catalogue that further names
// select (MetricDescriptor.selected_by) to those names, all as exposed
// (prefix, the plugin's metric_prefix, prepended): Input.SelectedBy. Nil
// when the catalogue has none.
func SelectedBy(metrics []*pluginv1.MetricDescriptor, prefix string) map[string][]string {
	var out map[string][]string
	for _, m := range metrics {
		if len(m.GetSelectedBy()) == 0 || strings.Contains(m.GetName(), "*") {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		names := make([]string, len(m.GetSelectedBy()))
		for i, n := range m.GetSelectedBy() {
			names[i] = prefix + n
		}
		out[prefix+m.GetName()] = names
	}
	return out
}

// allow is the allowlist decision for a family of in.
func (m *merger) allow(in Input, name string) bool {
	if in.SelectedBy == nil {
		return m.opts.Filter.Allow(name)
	}
	return m.opts.Filter.AllowFamily(name, in.SelectedBy[name])
}

// overBudget drops the samples of batches past the byte budget.
func (m *merger) overBudget(in Input, batches []*pluginv1.Batch, budget int) {
	n := 0
	for _, b := range batches {
		for _, c := range b.GetFamilies() {
			if int(c.GetName()) < len(b.GetStrings()) && m.allow(in, wire.TableString(b.Strings[c.Name])) {
				n += len(c.Values)
			}
		}
	}
	m.drop(in.Plugin, ReasonSeriesLimit, n, fmt.Sprintf("batches of more than %d MiB in one collect (the byte budget of --plugin.max-series %d)", budget>>20, in.MaxSeries))
}

// chunk runs the guard's stages on one family chunk of a plugin's batch and
// adds what passes to its family; it returns the plugin's series count.
// The stages, in order, each one function: the chunk's shape (wire.Open),
// the allowlist (allow), the family-level stages (familyStages), joining
// the exposed family (joinFamily), then per sample the device filter and
// the sample-level stages (sampleStages). A chunk refused by a family-level
// stage is dropped whole, with that stage's reason.
func (m *merger) chunk(in Input, b *pluginv1.Batch, c *pluginv1.FamilyChunk, series int) int {
	ch, err := wire.Open(b, c)
	if err != nil {
		m.drop(in.Plugin, ReasonMalformed, max(len(c.Values), 1), err.Error())
		return series
	}
	if !m.allow(in, ch.Name()) {
		return series // not wanted: not a drop
	}
	n := ch.Len()
	if n == 0 {
		return series
	}
	if reason, cause := m.familyStages(in, ch); reason != "" {
		m.drop(in.Plugin, reason, n, cause)
		return series
	}
	f, reason, cause := m.joinFamily(in, ch)
	if reason != "" {
		m.drop(in.Plugin, reason, n, cause)
	}
	if f == nil || reason != "" {
		return series
	}
	return m.samples(in, f, ch, series)
}

// familyStages are the stages that judge a chunk as a whole, in order:
// its metadata (names, help, unit: checkMetadata), the host's reserved
// prefixes, family ownership (Options.Owners), histogram bounds
// (checkBounds). It returns the first refusal's reason and cause, or "".
func (m *merger) familyStages(in Input, ch wire.Chunk) (reason, cause string) {
	name := ch.Name()
	if reason, err := checkMetadata(ch); err != nil {
		return reason, err.Error()
	}
	if p, ok := reservedPrefix(name, m.opts.ReservedPrefixes); ok {
		return ReasonConflict, fmt.Sprintf("family %s: prefix %s is reserved for the host's own metrics", name, p)
	}
	if why := m.foreign(name, ch.Type(), in.Plugin); why != "" {
		return ReasonForeignFamily, why
	}
	if reason, err := checkBounds(ch); err != nil {
		return reason, err.Error()
	}
	return "", ""
}

// joinFamily finds or starts the exposed family of ch (newFamily) and
// checks that ch may join it: no series name collision with another
// family, the same metadata as the plugin that exposed it first. A nil
// family with no reason: newFamily dropped the chunk itself.
func (m *merger) joinFamily(in Input, ch wire.Chunk) (f *Family, reason, cause string) {
	name := ch.Name()
	f = m.byName[name]
	if f == nil {
		if f = m.newFamily(in, ch); f == nil {
			return nil, "", ""
		}
	}
	if f.collides != "" {
		return f, ReasonNameCollision, fmt.Sprintf("family %s (%s) would expose %s", name, typeName(f.Type), f.collides)
	}
	if why := f.differs(ch); why != "" {
		return f, ReasonConflict, fmt.Sprintf("family %s already exposed by plugin %s with another %s", name, f.Plugin, why)
	}
	return f, "", ""
}

// chunkState is what the sample-level stages share over one chunk.
type chunkState struct {
	part              Part
	partIdx           int32
	histogram, native bool
}

// samples runs the device filter and the sample-level stages on every
// sample of ch and adds the samples that pass to f as one Part.
func (m *merger) samples(in Input, f *Family, ch wire.Chunk, series int) int {
	name, n := ch.Name(), ch.Len()
	perSample := ch.SeriesPerSample()
	if !f.seen.ready() {
		f.seen.init(max(n, m.sizeHint[name]))
	}
	cs := chunkState{
		part:      Part{Chunk: ch},
		partIdx:   int32(len(f.Parts)),
		histogram: ch.Type() == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM,
		native:    ch.IsNative(),
	}
	var keep []int32
	dropped := false
	devLabel := -1
	if m.opts.Devices.active() {
		devLabel = slices.Index(f.LabelNames, DeviceLabel)
	}
	for i := range n {
		lv := ch.LabelRefs(i)
		ok := true
		if devLabel >= 0 && !m.deviceAllowed(&ch, lv[devLabel]) {
			m.res.DeviceFiltered[in.Plugin] += perSample
			ok = false
		} else if reason, bad := m.sampleStages(in, f, &ch, &cs, i, lv, series+perSample); reason != "" {
			m.dropSample(in.Plugin, reason, func() string { return m.sampleCause(in, f, &ch, &cs, i, lv, reason, bad) })
			ok = false
		}
		if ok {
			series += perSample
			if dropped {
				keep = append(keep, int32(i))
			}
			continue
		}
		if !dropped {
			dropped = true
			keep = make([]int32, i, n)
			for j := range i {
				keep[j] = int32(j)
			}
		}
	}
	if dropped {
		if len(keep) == 0 {
			return series
		}
		cs.part.Keep = keep
	}
	f.Parts = append(f.Parts, cs.part)
	return series
}

// sampleStages are the stages that judge one sample (i, with label value
// references lv), in order: label values (badValue), classic histogram
// buckets (cumulative), native histogram shape (checkNative), the
// plugin's series cap (seriesAfter: the plugin's series count with this
// sample), duplicate series (last: it records the series as seen). It
// returns the first refusal's reason, or "", and for an invalid label
// value the index of the label (sampleCause formats the cause).
func (m *merger) sampleStages(in Input, f *Family, ch *wire.Chunk, cs *chunkState, i int, lv []uint32, seriesAfter int) (reason string, bad int) {
	if bad := m.badValue(ch, lv); bad >= 0 {
		return ReasonInvalidValue, bad
	}
	if cs.histogram && !cumulative(ch, i) {
		return ReasonInvalidHistogram, -1
	}
	if cs.native && checkNative(ch, i) != "" {
		return ReasonInvalidHistogram, -1
	}
	if in.MaxSeries > 0 && seriesAfter > in.MaxSeries {
		return ReasonSeriesLimit, -1
	}
	if f.duplicate(m.hashes, ch, lv, &cs.part, cs.partIdx, int32(i)) {
		return ReasonDuplicate, -1
	}
	return "", -1
}

// sampleCause is the cause, for the log, of sampleStages' refusal of
// sample i; formatted only when dropSample wants it.
func (m *merger) sampleCause(in Input, f *Family, ch *wire.Chunk, cs *chunkState, i int, lv []uint32, reason string, bad int) string {
	name := f.Name
	switch {
	case reason == ReasonInvalidValue:
		return fmt.Sprintf("family %s: label %s: value invalid UTF-8 or longer than %d bytes", name, f.LabelNames[bad], m.opts.MaxLabelValueLen)
	case reason == ReasonInvalidHistogram && cs.histogram && !cumulative(ch, i):
		return fmt.Sprintf("family %s: series %s: cumulative bucket counts decrease or exceed the count", name, labelString(f.LabelNames, ch, lv))
	case reason == ReasonInvalidHistogram:
		return fmt.Sprintf("family %s: series %s: native histogram: %s", name, labelString(f.LabelNames, ch, lv), checkNative(ch, i))
	case reason == ReasonSeriesLimit:
		return fmt.Sprintf("more than %d series (--plugin.max-series)", in.MaxSeries)
	default: // ReasonDuplicate
		return fmt.Sprintf("family %s: series %s exposed twice", name, labelString(f.LabelNames, ch, lv))
	}
}

// newFamily starts family ch.Name() with ch's metadata, once it is sure
// that none of the names it exposes is reserved for the host or already
// used by another family. A family that would collide is kept as a marker,
// so that its later chunks are dropped for the same reason; it returns nil
// for a reserved name.
func (m *merger) newFamily(in Input, ch wire.Chunk) *Family {
	name := ch.Name()
	f := &Family{Name: name, Type: ch.Type(), Help: ch.Help(), Unit: ch.Unit(), Plugin: in.Plugin}
	names := seriesNames(name, f.Type)
	for _, s := range names {
		if p, ok := reservedPrefix(s, m.opts.ReservedPrefixes); ok {
			m.drop(in.Plugin, ReasonConflict, ch.Len(), fmt.Sprintf("family %s (%s) would expose %s: prefix %s is reserved for the host's own metrics", name, typeName(f.Type), s, p))
			return nil
		}
	}
	f.collides = createdQuantiles(name, f.Type)
	for _, s := range names {
		if other, ok := m.claims[s]; ok && f.collides == "" {
			f.collides = fmt.Sprintf("%s, a series name of family %s (%s)", s, other, typeName(m.byName[other].Type))
		}
	}
	m.byName[name] = f
	if f.collides != "" {
		return f
	}
	for _, s := range names {
		m.claims[s] = name
	}
	f.LabelNames = make([]string, ch.NumLabels())
	for j := range f.LabelNames {
		f.LabelNames[j] = ch.LabelName(j)
	}
	return f
}

// deviceAllowed applies Options.Devices to the device label value at
// string index idx, once per batch and value.
func (m *merger) deviceAllowed(ch *wire.Chunk, idx uint32) bool {
	switch m.devices[idx] {
	case 1:
		return true
	case 2:
		return false
	}
	if m.opts.Devices.Allow(ch.String(idx)) {
		m.devices[idx] = 1
		return true
	}
	m.devices[idx] = 2
	return false
}

// badValue returns the index of the first invalid label value, or -1.
func (m *merger) badValue(ch *wire.Chunk, lv []uint32) int {
	for j, idx := range lv {
		switch m.valid[idx] {
		case 1:
			continue
		case 2:
			return j
		}
		s := ch.String(idx)
		if !utf8.ValidString(s) || (m.opts.MaxLabelValueLen > 0 && len(s) > m.opts.MaxLabelValueLen) {
			m.valid[idx] = 2
			return j
		}
		m.valid[idx] = 1
		m.hashes[idx] = maphash.String(m.seed, s)
	}
	return -1
}

// seenSet is a family's set of series hashes during a merge. Most
// families are small (an rdma scrape: 57 families of 32 series), and for
// them a slice scanned in full is cheaper than a table, to fill and to make;
// a family that grows past smallSeen moves to an open-addressing table
// (linear probing, at most half full) of pooled memory. The sums are
// already hashes (seeded per merge), so the table takes their low bits as
// they are; 0 marks an empty slot, so a sum of 0 is kept beside the table.
type seenSet struct {
	small []seenHash
	tab   []seenHash // len a power of two; nil while small
	n     int        // entries in tab
	zero  *ref       // the ref of sum 0, once the table is in use
}

type seenHash struct {
	sum uint64
	ref ref
}

// smallSeen is the size up to which a seenSet scans a slice.
const smallSeen = 64

// seenTables keeps the tables' memory from merge to merge (a 100k-series
// scrape fills about 3 MB of them).
// One pool per table size (a power of two), so a table taken from a pool
// always fits: a single pool handed out tables too small for the family,
// and each such miss left one more table in it.
var seenTables [64]sync.Pool

// putTable gives a table back to the pool of its size.
func putTable(t []seenHash) {
	seenTables[bits.Len(uint(len(t)))].Put(&t)
}

func (s *seenSet) ready() bool { return s.small != nil || s.tab != nil }

// init makes the set for about n series.
func (s *seenSet) init(n int) {
	if n > smallSeen {
		s.grow(n)
		return
	}
	s.small = make([]seenHash, 0, max(n, 1))
}

// grow moves the set to a table for at least n entries.
func (s *seenSet) grow(n int) {
	size := 4 * smallSeen
	for size < 2*n {
		size *= 2
	}
	old := s.tab
	if p, ok := seenTables[bits.Len(uint(size))].Get().(*[]seenHash); ok {
		s.tab = *p
		clear(s.tab)
	} else {
		s.tab = make([]seenHash, size)
	}
	s.n = 0
	for _, e := range s.small {
		s.insert(e.sum, e.ref)
	}
	s.small = nil
	for _, e := range old {
		if e.sum != 0 {
			s.insert(e.sum, e.ref)
		}
	}
	if old != nil {
		putTable(old)
	}
}

// release gives the table's memory back for another merge.
func (s *seenSet) release() {
	if s.tab != nil {
		putTable(s.tab)
	}
	*s = seenSet{}
}

func (s *seenSet) get(sum uint64) (ref, bool) {
	if s.tab == nil {
		for i := range s.small {
			if s.small[i].sum == sum {
				return s.small[i].ref, true
			}
		}
		return ref{}, false
	}
	if sum == 0 {
		if s.zero != nil {
			return *s.zero, true
		}
		return ref{}, false
	}
	mask := uint64(len(s.tab) - 1)
	for i := sum & mask; ; i = (i + 1) & mask {
		switch e := &s.tab[i]; e.sum {
		case sum:
			return e.ref, true
		case 0:
			return ref{}, false
		}
	}
}

func (s *seenSet) put(sum uint64, r ref) {
	if s.tab == nil {
		if len(s.small) < smallSeen {
			s.small = append(s.small, seenHash{sum, r})
			return
		}
		s.grow(4 * smallSeen)
	}
	if 2*(s.n+1) > len(s.tab) {
		s.grow(2 * len(s.tab))
	}
	s.insert(sum, r)
}

// add records r under sum and returns false, or, if sum is recorded
// already, returns what was recorded first and true: in a table, one probe
// sequence does both.
func (s *seenSet) add(sum uint64, r ref) (ref, bool) {
	if s.tab == nil || sum == 0 {
		if prev, ok := s.get(sum); ok {
			return prev, true
		}
		s.put(sum, r)
		return ref{}, false
	}
	if 2*(s.n+1) > len(s.tab) {
		s.grow(2 * len(s.tab))
	}
	mask := uint64(len(s.tab) - 1)
	for i := sum & mask; ; i = (i + 1) & mask {
		switch e := &s.tab[i]; e.sum {
		case sum:
			return e.ref, true
		case 0:
			*e = seenHash{sum, r}
			s.n++
			return ref{}, false
		}
	}
}

// insert adds sum to the table, which has room for it.
func (s *seenSet) insert(sum uint64, r ref) {
	if sum == 0 {
		s.zero = &r
		return
	}
	mask := uint64(len(s.tab) - 1)
	i := sum & mask
	for s.tab[i].sum != 0 {
		i = (i + 1) & mask
	}
	s.tab[i] = seenHash{sum, r}
	s.n++
}

// duplicate records the series and reports whether it was seen before.
// hashes holds the seeded hash of each of the batch's strings that lv
// refers to (badValue fills it, once per string and batch); the series'
// hash combines them in label order, so a value repeated over thousands
// of series is hashed once, not once per series. Equal hashes are
// confirmed by comparing the strings, as before.
func (f *Family) duplicate(hashes []uint64, ch *wire.Chunk, lv []uint32, part *Part, partIdx, sample int32) bool {
	var sum uint64
	for _, idx := range lv {
		sum = mix(sum ^ hashes[idx])
	}
	prev, ok := f.seen.add(sum, ref{partIdx, sample})
	if !ok {
		return false
	}
	// Same hash: compare the strings; a true collision goes to the overflow set.
	var pp *Part
	if prev.part == partIdx {
		pp = part
	} else {
		pp = &f.Parts[prev.part]
	}
	plv := pp.Chunk.LabelRefs(int(prev.sample))
	same := true
	for j := range lv {
		if pp.Chunk.String(plv[j]) != ch.String(lv[j]) {
			same = false
			break
		}
	}
	if same {
		return true
	}
	key := labelString(f.LabelNames, ch, lv)
	if _, ok := f.overflow[key]; ok {
		return true
	}
	if f.overflow == nil {
		f.overflow = map[string]struct{}{}
	}
	f.overflow[key] = struct{}{}
	return false
}

// mix folds x into a series hash: the two halves of x times an odd
// constant, xored (the wyhash mixer). The strings' hashes are seeded per
// merge, so a plugin cannot aim for collisions.
func mix(x uint64) uint64 {
	hi, lo := bits.Mul64(x, 0x9e3779b97f4a7c15)
	return hi ^ lo
}

// differs names the metadata in which a chunk differs from the family.
func (f *Family) differs(ch wire.Chunk) string {
	switch {
	case f.Type != ch.Type():
		return "type"
	case f.Help != ch.Help():
		return "help text"
	case f.Unit != ch.Unit():
		return "unit"
	case len(f.LabelNames) != ch.NumLabels():
		return "label set"
	}
	for j, l := range f.LabelNames {
		if l != ch.LabelName(j) {
			return "label set"
		}
	}
	return ""
}

func labelString(names []string, ch *wire.Chunk, lv []uint32) string {
	var s strings.Builder
	s.WriteByte('{')
	for j, idx := range lv {
		if j > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, "%s=%q", names[j], ch.String(idx))
	}
	s.WriteByte('}')
	return s.String()
}

// Concat joins two merged family lists with disjoint names, keeping the order.
func Concat(a, b []*Family) []*Family {
	out := make([]*Family, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i].Name < b[j].Name {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

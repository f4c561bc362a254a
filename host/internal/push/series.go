package push

import (
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// staleNaN is Prometheus's staleness marker: a series that was in the last
// snapshot and is not in this one gets it, so that a query stops drawing
// the series at once instead of five minutes later.
var staleNaN = math.Float64frombits(value.StaleNaN)

// table holds every label set that a pending snapshot or the last one
// uses, once: a snapshot is then series ids and values, 12 bytes a
// sample. An id is freed when nothing holds it any more. Label sets are
// found by a 64-bit hash of their key, verified against the key; a key
// whose hash another key has already goes to overflow, so no series is
// ever merged with another by a hash accident.
type table struct {
	seed     maphash.Seed
	byHash   map[uint64]uint32
	overflow map[string]uint32
	labels   [][]prompb.Label // by id; nil when free
	enc      [][]byte         // by id: encodeLabels(labels[id])
	keys     []string         // by id
	hashes   []uint64         // by id
	refs     []int32          // by id
	info     []seriesInfo     // by id: what the series is (RW 2.0 metadata, OTLP)
	// By id, for OTLP's cumulative sums: the start time (ms, 0: not seen
	// yet) and the last value sent.
	start []int64
	prev  []float64
	// By id, OTLP: its data point's attributes, encoded (attrsOf), and
	// the kind of data point and role they were made for (0: not made).
	attrs    []protoreflect.RawFields
	attrsFor []uint8
	free     []uint32
	syms     symbols
}

// symbols interns the strings of the label sets remote write 2.0 sends,
// each with a number (gid) and a count of the label sets that use it, so
// that a request's symbols table is made by indexing, not by hashing every
// label's name and value again, request after request.
type symbols struct {
	byStr map[string]uint32
	str   []string // by gid
	refs  []int32  // by gid
	free  []uint32
	of    [][]uint32 // by series id: the gids of its labels' names and values (nil: not made yet)
	// A request's symbol of a gid is ref[gid] when stamp[gid] is the
	// request's epoch.
	stamp, ref []uint32
	epoch      uint32
}

// intern returns the gid of s and holds it once more.
func (y *symbols) intern(s string) uint32 {
	g, ok := y.byStr[s]
	if !ok {
		if n := len(y.free); n > 0 {
			g, y.free = y.free[n-1], y.free[:n-1]
		} else {
			g = uint32(len(y.str))
			y.str, y.refs = append(y.str, ""), append(y.refs, 0)
		}
		y.str[g] = s
		if y.byStr == nil {
			y.byStr = map[string]uint32{}
		}
		y.byStr[s] = g
	}
	y.refs[g]++
	return g
}

// symsOf returns the gids of series id's labels (name, value, ...),
// interning them the first time. t is held by the pusher's lock.
func (t *table) symsOf(id uint32) []uint32 {
	y := &t.syms
	if int(id) >= len(y.of) {
		y.of = append(y.of, make([][]uint32, int(id)+1-len(y.of))...)
	}
	if y.of[id] == nil {
		g := make([]uint32, 0, 2*len(t.labels[id]))
		for _, l := range t.labels[id] {
			g = append(g, y.intern(l.Name), y.intern(l.Value))
		}
		y.of[id] = g
	}
	return y.of[id]
}

// dropSyms lets go of series id's gids.
func (y *symbols) dropSyms(id uint32) {
	if int(id) >= len(y.of) {
		return
	}
	for _, g := range y.of[id] {
		if y.refs[g]--; y.refs[g] == 0 {
			delete(y.byStr, y.str[g])
			y.str[g] = ""
			y.free = append(y.free, g)
		}
	}
	y.of[id] = nil
}

// request starts a request's symbols table: the empty string first, as
// remote write 2.0 requires.
func (y *symbols) request() []string {
	if len(y.stamp) < len(y.str) {
		n := len(y.str) - len(y.stamp)
		y.stamp, y.ref = append(y.stamp, make([]uint32, n)...), append(y.ref, make([]uint32, n)...)
	}
	if y.epoch++; y.epoch == 0 { // wrapped: no stamp may match a new epoch
		clear(y.stamp)
		y.epoch = 1
	}
	return []string{""}
}

// symbolize returns gid's number in the request's symbols table syms,
// adding it the first time.
func (y *symbols) symbolize(syms *[]string, g uint32) uint32 {
	if y.stamp[g] != y.epoch {
		y.stamp[g] = y.epoch
		if s := y.str[g]; s == "" {
			y.ref[g] = 0
		} else {
			y.ref[g] = uint32(len(*syms))
			*syms = append(*syms, s)
		}
	}
	return y.ref[g]
}

// famMeta is a family's metadata, once per family (interned).
type famMeta struct {
	name, help, unit string
	typ              pluginv1.MetricType
}

// Roles of a series in its family.
const (
	roleValue    uint8 = iota // counter, gauge, untyped: the family's sample
	roleBucket                // histogram _bucket (bound: le)
	roleSum                   // histogram or summary _sum
	roleCount                 // histogram or summary _count
	roleQuantile              // summary quantile (bound: the quantile)
	roleNative                // native histogram: the family's name, one histogram sample (labelBuilder.nat)
)

// seriesInfo says what a series is: its family and its role there.
type seriesInfo struct {
	fam   *famMeta
	role  uint8
	first bool    // the first series of an OTLP data point (requests do not split one)
	bound float64 // le or quantile
}

func newTable() *table {
	return &table{seed: maphash.MakeSeed(), byHash: map[uint64]uint32{}, overflow: map[string]uint32{}}
}

// ref returns the id of the label set whose key is key (copying ls, a
// scratch buffer, when it is new) and holds it once more.
func (t *table) ref(key []byte, ls []prompb.Label) uint32 {
	return t.refHash(key, maphash.Bytes(t.seed, key), ls)
}

// setInfo records what series id is.
func (t *table) setInfo(id uint32, in seriesInfo) {
	if int(id) >= len(t.info) {
		n := int(id) + 1 - len(t.info)
		t.info = append(t.info, make([]seriesInfo, n)...)
		t.start = append(t.start, make([]int64, n)...)
		t.prev = append(t.prev, make([]float64, n)...)
	}
	t.info[id] = in
}

// refHash is ref with key's hash h.
func (t *table) refHash(key []byte, h uint64, ls []prompb.Label) uint32 {
	id, ok := t.byHash[h]
	if ok && t.keys[id] != string(key) {
		id, ok = t.overflow[string(key)] // no allocation for the lookup
	} else if !ok && len(t.overflow) > 0 {
		id, ok = t.overflow[string(key)]
	}
	if !ok {
		if n := len(t.free); n > 0 {
			id, t.free = t.free[n-1], t.free[:n-1]
		} else {
			id = uint32(len(t.labels))
			t.labels, t.enc, t.keys, t.hashes, t.refs = append(t.labels, nil), append(t.enc, nil), append(t.keys, ""), append(t.hashes, 0), append(t.refs, 0)
		}
		// Copies: the strings of ls may point into a plugin's batch,
		// which the table must not keep alive.
		k := string(key)
		own := make([]prompb.Label, len(ls))
		for i, l := range ls {
			own[i] = prompb.Label{Name: strings.Clone(l.Name), Value: strings.Clone(l.Value)}
		}
		t.labels[id], t.enc[id], t.keys[id], t.hashes[id] = own, encodeLabels(own), k, h
		if _, taken := t.byHash[h]; taken {
			t.overflow[k] = id
		} else {
			t.byHash[h] = id
		}
	}
	t.refs[id]++
	return id
}

// hold takes one more reference on id.
func (t *table) hold(id uint32) { t.refs[id]++ }

// release lets go of one reference on each of ids.
func (t *table) release(ids []uint32) {
	for _, id := range ids {
		if t.refs[id]--; t.refs[id] == 0 {
			if cur, ok := t.byHash[t.hashes[id]]; ok && cur == id {
				delete(t.byHash, t.hashes[id])
			} else {
				delete(t.overflow, t.keys[id])
			}
			t.labels[id], t.enc[id], t.keys[id] = nil, nil, ""
			if int(id) < len(t.info) {
				t.info[id], t.start[id], t.prev[id] = seriesInfo{}, 0, 0
			}
			t.syms.dropSyms(id)
			if int(id) < len(t.attrs) {
				t.attrs[id], t.attrsFor[id] = nil, 0
			}
			t.free = append(t.free, id)
		}
	}
}

// len is the number of label sets held.
func (t *table) len() int { return len(t.byHash) + len(t.overflow) }

// flatten turns merged families into the series the text exposition
// shows, name for name (host/internal/expose writes the same walk): a
// counter, gauge or untyped sample is one series, a histogram its _bucket
// series (with le, +Inf last), _sum and _count, a summary its quantiles,
// _sum and _count. A native histogram is one series named as its family,
// its value the count (roleNative: the histogram is the labelBuilder's
// nat, natCount and natSum), as Prometheus ingests it from a protobuf
// scrape; the classic buckets a plugin may serve along are left out.
// external labels are added to series that lack them. Each series goes to
// emit with its key and sorted labels, in buffers reused for the next;
// label strings point into the plugins' batches (table.ref copies them).
func flatten(fams []*guard.Family, external []prompb.Label, emit func(key []byte, ls []prompb.Label, v float64)) {
	flattenInfo(fams, external, nil, nil, func(key []byte, b *labelBuilder, v float64, _ seriesInfo) { emit(key, b.labels(), v) })
}

// flattenInfo is flatten that also says what each series is; intern
// returns the interned metadata of a family (nil: none kept). emit gets
// the series' key; its sorted labels are b.labels(), made only when asked
// for (a series the table holds already needs its key only). With memo
// (nil: none), a series of a part whose series are those of the part at
// the same place in memo's last flatten gets no key (nil): b.prev is then
// the number of the same series in the last flatten's emit order, and the
// caller tells memo each series' id in turn (flatMemo.note).
func flattenInfo(fams []*guard.Family, external []prompb.Label, intern func(*guard.Family) *famMeta, memo *flatMemo, emit func(key []byte, b *labelBuilder, v float64, in seriesInfo)) {
	b := labelBuilder{external: external, emit: emit, prev: -1}
	var les []string
	if memo != nil {
		memo.begin(len(fams))
		defer memo.end()
	}
	for fi, f := range fams {
		bucket, sum, count := f.Name+"_bucket", f.Name+"_sum", f.Name+"_count"
		if intern != nil {
			b.fam = intern(f)
		}
		// Where each label comes from, in name order, once per family:
		// the series' name, le or quantile, the family's labels, the
		// external labels.
		plain := b.plan(b.plain[:0], f.LabelNames, "")
		b.plain = plain
		var bound []plan
		switch f.Type {
		case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
			bound = b.plan(b.bound[:0], f.LabelNames, "le")
		case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
			bound = b.plan(b.bound[:0], f.LabelNames, "quantile")
		}
		b.bound = bound
		if memo != nil {
			memo.family(fi, f)
		}
		for pi := range f.Parts {
			p := &f.Parts[pi]
			c := &p.Chunk
			b.prev = -1
			if memo != nil {
				b.prev = memo.part(fi, pi, f, p)
			}
			// le or quantile values, shared by the chunk's samples.
			les = les[:0]
			for _, x := range c.Bounds() {
				les = append(les, formatFloat(x))
			}
			for k, n := 0, p.Samples(); k < n; k++ {
				i := p.Index(k)
				b.reset(c, c.LabelRefs(i))
				switch f.Type {
				case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
					if c.IsNative() {
						b.nat, b.natCount, b.natSum = c.Native(i), c.Count(i), c.Value(i)
						b.first = true
						b.add(plain, f.Name, "", float64(c.Count(i)), roleNative, 0)
						continue
					}
					bounds, cum := c.Buckets(i)
					b.first = true
					for j, ub := range bounds {
						b.add(bound, bucket, les[j], float64(cum[j]), roleBucket, ub)
					}
					b.add(bound, bucket, "+Inf", float64(c.Count(i)), roleBucket, math.Inf(1))
					b.add(plain, sum, "", c.Value(i), roleSum, 0)
					b.add(plain, count, "", float64(c.Count(i)), roleCount, 0)
				case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
					qs, vs := c.Quantiles(i)
					b.first = true
					for j, q := range qs {
						b.add(bound, f.Name, les[j], vs[j], roleQuantile, q)
					}
					b.add(plain, sum, "", c.Value(i), roleSum, 0)
					b.add(plain, count, "", float64(c.Count(i)), roleCount, 0)
				default:
					b.first = true
					b.add(plain, f.Name, "", c.Value(i), roleValue, 0)
				}
			}
		}
	}
}

// formatFloat writes le and quantile values as the text exposition does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Where a label of a plan takes its value from.
const (
	fromLabels uint8 = iota // the family's label own (when not empty), else the external one
	fromName                // the series' name (__name__)
	fromExtra               // le or quantile
)

// plan is one label name of a family's series, in name order: where its
// value comes from.
type plan struct {
	name string
	from uint8
	own  int // index in the family's label names, -1: none
	ext  int // index in the external labels, -1: none
}

// labelBuilder makes the sorted label sets of one metric's series.
type labelBuilder struct {
	external     []prompb.Label // sorted
	plain, bound []plan         // the current family's plans (reused buffers)
	vals         []string       // the current metric's label values, by the family's label index
	// The current series: its plan, name and le or quantile value, and
	// its labels once made (valid: ls is this series').
	cur            []plan
	name, extraVal string
	ls             []prompb.Label
	valid          bool
	key            []byte
	fam            *famMeta
	first          bool // the next series added starts a data point
	// The current native histogram (roleNative): its buckets (pointing
	// into the batch), count and sum.
	nat      wire.Native
	natCount uint64
	natSum   float64
	emit     func(key []byte, b *labelBuilder, v float64, in seriesInfo)
	// The current series' number in the last flatten's emit order when
	// its part's series are the same (flatMemo), else -1.
	prev int
}

// plan returns, in buf, the labels of a family's series whose label names
// are names, with the extra label (le, quantile; "" for none): the text
// exposition's label set, sorted by name, as Prometheus reads it. A label
// of the family whose value is empty is no label (Prometheus reads the
// text so); the external labels fill in the names the series lacks; the
// name, le and quantile are the series' own and win over any other.
func (b *labelBuilder) plan(buf []plan, names []string, extra string) []plan {
	buf = buf[:0]
	at := func(name string) int {
		for i := range buf {
			if buf[i].name == name {
				return i
			}
		}
		buf = append(buf, plan{name: name, own: -1, ext: -1})
		return len(buf) - 1
	}
	for j, n := range names {
		buf = append(buf, plan{name: n, own: j, ext: -1})
	}
	for e, l := range b.external {
		buf[at(l.Name)].ext = e
	}
	buf[at("__name__")].from = fromName
	if extra != "" {
		buf[at(extra)].from = fromExtra
	}
	slices.SortStableFunc(buf, func(x, y plan) int { return strings.Compare(x.name, y.name) })
	return buf
}

// reset reads a metric's label values, for its series that follow.
func (b *labelBuilder) reset(c *wire.Chunk, refs []uint32) {
	b.vals = b.vals[:0]
	for _, ref := range refs {
		b.vals = append(b.vals, c.String(ref))
	}
}

// value is the value of label e of the current series, and whether the
// series has that label.
func (b *labelBuilder) value(e *plan) (string, bool) {
	switch e.from {
	case fromName:
		return b.name, true
	case fromExtra:
		return b.extraVal, true
	}
	if e.own >= 0 {
		if v := b.vals[e.own]; v != "" {
			return v, true
		}
	}
	if e.ext >= 0 {
		return b.external[e.ext].Value, true
	}
	return "", false
}

// add emits the series name{labels of plan p, with extraVal for le or
// quantile} with value v.
func (b *labelBuilder) add(p []plan, name, extraVal string, v float64, role uint8, bound float64) {
	b.cur, b.name, b.extraVal, b.valid = p, name, extraVal, false
	if b.prev >= 0 { // the same series as the last flatten's b.prev-th
		b.emit(nil, b, v, seriesInfo{fam: b.fam, role: role, first: b.first, bound: bound})
		b.prev++
		b.first = false
		return
	}
	key := b.key[:0]
	for i := range p {
		if val, ok := b.value(&p[i]); ok {
			key = append(key, p[i].name...)
			key = append(key, 0xff)
			key = append(key, val...)
			key = append(key, 0xff)
		}
	}
	b.key = key
	b.emit(key, b, v, seriesInfo{fam: b.fam, role: role, first: b.first, bound: bound})
	b.first = false
}

// labels returns the current series' labels, sorted by name, in a buffer
// reused for the next series.
func (b *labelBuilder) labels() []prompb.Label {
	if !b.valid {
		ls := b.ls[:0]
		for i := range b.cur {
			if val, ok := b.value(&b.cur[i]); ok {
				ls = append(ls, prompb.Label{Name: b.cur[i].name, Value: val})
			}
		}
		b.ls, b.valid = ls, true
	}
	return b.ls
}

// flatMemo lets a snapshot skip building and comparing the key of every
// series of a plugin's chunk that holds the same series as last time, the
// usual case push after push: it remembers, for each part of the last
// flatten (by family and part index), what makes its series (the batch's
// string table, copied once per batch; the chunk's name, label names and
// label values as string-table indexes; the kept samples; the bounds; the
// family's name, type and label names), where its series began in emit
// order, and the id the caller gave each series (note). A part equal in
// all of these emits the same series in the same order: byte for byte
// equal columns, no hash. The label values compared are indexes into a
// string table compared whole, so the cost is a memory comparison of the
// chunk's index columns and of each batch's distinct strings, not the
// series' keys. Not used across a change of external labels (one memo per
// pusher, whose external labels are fixed).
type flatMemo struct {
	parts, next  [][]partMemo // by family, by part: the last flatten's; this one's
	ids, nextIDs []uint32     // by emit number: the last flatten's series ids; this one's
	// This flatten's string tables by batch (the first string's address),
	// each a copy or the last flatten's equal one.
	tabs map[*[]byte]*stringTable
	fam  bool // the current family is the same as at its place last time
}

// stringTable is a batch's string table, copied.
type stringTable struct {
	data []byte
	end  []int // by index: where its string ends in data
}

func copyTable(strs [][]byte) *stringTable {
	n := 0
	for _, s := range strs {
		n += len(s)
	}
	t := &stringTable{data: make([]byte, 0, n), end: make([]int, len(strs))}
	for i, s := range strs {
		t.data = append(t.data, s...)
		t.end[i] = len(t.data)
	}
	return t
}

func (t *stringTable) equal(strs [][]byte) bool {
	if len(strs) != len(t.end) {
		return false
	}
	start := 0
	for i, s := range strs {
		if string(t.data[start:t.end[i]]) != string(s) {
			return false
		}
		start = t.end[i]
	}
	return true
}

// partMemo is what made one part's series, and where they began.
type partMemo struct {
	tab             *stringTable
	name            string // the family's
	typ             pluginv1.MetricType
	labelNames      []string // the family's
	nameRef         uint32
	labelNameRefs   []uint32
	labelRefs       []uint32
	keep            []int32
	keepAll, native bool
	bounds          []float64
	start           int // emit number of its first series
}

func (m *flatMemo) begin(families int) {
	if cap(m.next) < families {
		m.next = make([][]partMemo, families)
	}
	m.next = m.next[:families]
	m.nextIDs = m.nextIDs[:0]
	if m.tabs == nil {
		m.tabs = map[*[]byte]*stringTable{}
	}
}

// end makes this flatten's memo the last one, and lets go of the
// batches (the map's keys point into them).
func (m *flatMemo) end() {
	clear(m.tabs)
	m.parts, m.next = m.next, m.parts
	m.ids, m.nextIDs = m.nextIDs, m.ids
}

// note records the id of the series emitted next (every emit, in order).
func (m *flatMemo) note(id uint32) { m.nextIDs = append(m.nextIDs, id) }

// id is the id of the last flatten's series number j.
func (m *flatMemo) id(j int) uint32 { return m.ids[j] }

// family starts family fi of this flatten.
func (m *flatMemo) family(fi int, f *guard.Family) {
	m.next[fi] = m.next[fi][:0]
	m.fam = false
	if fi < len(m.parts) && len(m.parts[fi]) > 0 {
		o := &m.parts[fi][0]
		m.fam = o.name == f.Name && o.typ == f.Type && slices.Equal(o.labelNames, f.LabelNames)
	}
}

// part records part pi of family fi, whose series are emitted next, and
// returns the emit number of its first series in the last flatten when
// they are the same series, else -1.
func (m *flatMemo) part(fi, pi int, f *guard.Family, p *guard.Part) int {
	c := &p.Chunk
	strs := c.StringTable()
	var key *[]byte
	if len(strs) > 0 {
		key = &strs[0]
	}
	var old *partMemo
	if m.fam && pi < len(m.parts[fi]) {
		old = &m.parts[fi][pi]
	}
	tab := m.tabs[key]
	if tab == nil {
		if old != nil && old.tab.equal(strs) {
			tab = old.tab
		} else {
			tab = copyTable(strs)
		}
		m.tabs[key] = tab
	}
	start := len(m.nextIDs)
	same := old != nil && old.tab == tab && old.nameRef == c.NameRef() && old.native == c.IsNative() &&
		old.keepAll == (p.Keep == nil) && slices.Equal(old.keep, p.Keep) &&
		slices.Equal(old.labelNameRefs, c.LabelNameRefs()) && slices.Equal(old.labelRefs, c.AllLabelRefs()) &&
		slices.Equal(old.bounds, c.Bounds())
	if same {
		m.next[fi] = append(m.next[fi], *old)
		m.next[fi][pi].start = start
		return old.start
	}
	names := f.LabelNames
	if old != nil {
		names = old.labelNames // equal (m.fam)
	} else {
		names = slices.Clone(names)
	}
	m.next[fi] = append(m.next[fi], partMemo{
		tab: tab, name: strings.Clone(f.Name), typ: f.Type, labelNames: names,
		nameRef: c.NameRef(), labelNameRefs: slices.Clone(c.LabelNameRefs()), labelRefs: slices.Clone(c.AllLabelRefs()),
		keep: slices.Clone(p.Keep), keepAll: p.Keep == nil, native: c.IsNative(), bounds: slices.Clone(c.Bounds()), start: start,
	})
	return -1
}

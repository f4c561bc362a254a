package push

import (
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

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
	free     []uint32
}

func newTable() *table {
	return &table{seed: maphash.MakeSeed(), byHash: map[uint64]uint32{}, overflow: map[string]uint32{}}
}

// ref returns the id of the label set whose key is key (copying ls, a
// scratch buffer, when it is new) and holds it once more.
func (t *table) ref(key []byte, ls []prompb.Label) uint32 {
	return t.refHash(key, maphash.Bytes(t.seed, key), ls)
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
// _sum and _count. A native histogram is sent as the classic series the
// text format shows for it; native histogram samples are not sent yet.
// external labels are added to series that lack them. Each series goes to
// emit with its key and sorted labels, in buffers reused for the next;
// label strings point into the plugins' batches (table.ref copies them).
func flatten(fams []*guard.Family, external []prompb.Label, emit func(key []byte, ls []prompb.Label, v float64)) {
	b := labelBuilder{external: external, emit: emit}
	for _, f := range fams {
		bucket, sum, count := f.Name+"_bucket", f.Name+"_sum", f.Name+"_count"
		for pi := range f.Parts {
			p := &f.Parts[pi]
			c := &p.Chunk
			for k, n := 0, p.Samples(); k < n; k++ {
				i := p.Index(k)
				b.reset(f.LabelNames, c, c.LabelRefs(i))
				switch f.Type {
				case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
					bounds, cum := c.Buckets(i)
					for j, ub := range bounds {
						b.add(bucket, "le", formatFloat(ub), float64(cum[j]))
					}
					b.add(bucket, "le", "+Inf", float64(c.Count(i)))
					b.add(sum, "", "", c.Value(i))
					b.add(count, "", "", float64(c.Count(i)))
				case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
					qs, vs := c.Quantiles(i)
					for j, q := range qs {
						b.add(f.Name, "quantile", formatFloat(q), vs[j])
					}
					b.add(sum, "", "", c.Value(i))
					b.add(count, "", "", float64(c.Count(i)))
				default:
					b.add(f.Name, "", "", c.Value(i))
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

// labelBuilder makes the sorted label sets of one metric's series.
type labelBuilder struct {
	external []prompb.Label // sorted
	// own is the metric's labels and the external labels it lacks, sorted:
	// made once per metric, for the several series of a histogram.
	own  []prompb.Label
	ls   []prompb.Label
	key  []byte
	emit func(key []byte, ls []prompb.Label, v float64)
}

func byName(x prompb.Label, name string) int { return strings.Compare(x.Name, name) }

// insert puts l into ls, sorted by name; a label of the same name is
// replaced when replace is set, else kept.
func insert(ls []prompb.Label, l prompb.Label, replace bool) []prompb.Label {
	i, found := slices.BinarySearchFunc(ls, l.Name, byName)
	switch {
	case !found:
		return slices.Insert(ls, i, l)
	case replace:
		ls[i] = l
	}
	return ls
}

func (b *labelBuilder) reset(names []string, c *wire.Chunk, refs []uint32) {
	b.own = b.own[:0]
	for j, ref := range refs {
		if v := c.String(ref); v != "" { // an empty value is no label, as Prometheus reads the text
			b.own = append(b.own, prompb.Label{Name: names[j], Value: v})
		}
	}
	slices.SortFunc(b.own, func(x, y prompb.Label) int { return strings.Compare(x.Name, y.Name) })
	for _, e := range b.external {
		b.own = insert(b.own, e, false)
	}
}

// add emits the series name{own labels, extra=extraVal, external labels
// the series lacks} with value v.
func (b *labelBuilder) add(name, extra, extraVal string, v float64) {
	ls := append(b.ls[:0], b.own...)
	ls = insert(ls, prompb.Label{Name: "__name__", Value: name}, true)
	if extra != "" {
		// le and quantile are the series' own: they win over an external
		// label of that name.
		ls = insert(ls, prompb.Label{Name: extra, Value: extraVal}, true)
	}
	key := b.key[:0]
	for _, l := range ls {
		key = append(key, l.Name...)
		key = append(key, 0xff)
		key = append(key, l.Value...)
		key = append(key, 0xff)
	}
	b.ls, b.key = ls, key
	b.emit(key, ls, v)
}

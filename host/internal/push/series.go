package push

import (
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
)

// staleNaN is Prometheus's staleness marker: a series that was in the last
// snapshot and is not in this one gets it, so that a query stops drawing
// the series at once instead of five minutes later.
var staleNaN = math.Float64frombits(value.StaleNaN)

// table holds every label set that a pending batch or the last snapshot
// uses, once: a batch is then series ids and values, 12 bytes a sample.
// An id is freed when nothing holds it any more.
type table struct {
	ids    map[string]uint32
	labels [][]prompb.Label // by id; nil when free
	keys   []string         // by id
	refs   []int32          // by id
	free   []uint32
}

func newTable() *table { return &table{ids: map[string]uint32{}} }

// ref returns the id of the label set whose key is key (cloning ls, a
// scratch buffer, when it is new) and holds it once more.
func (t *table) ref(key []byte, ls []prompb.Label) uint32 {
	id, ok := t.ids[string(key)] // no allocation for the lookup
	if !ok {
		if n := len(t.free); n > 0 {
			id, t.free = t.free[n-1], t.free[:n-1]
		} else {
			id = uint32(len(t.labels))
			t.labels, t.keys, t.refs = append(t.labels, nil), append(t.keys, ""), append(t.refs, 0)
		}
		k := string(key)
		t.ids[k], t.labels[id], t.keys[id] = id, slices.Clone(ls), k
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
			delete(t.ids, t.keys[id])
			t.labels[id], t.keys[id] = nil, ""
			t.free = append(t.free, id)
		}
	}
}

// len is the number of label sets held.
func (t *table) len() int { return len(t.ids) }

// flatten turns merged families into the series the text exposition
// shows, name for name: a counter or gauge is one series, a histogram its
// _bucket (with le, +Inf last), _sum and _count, a summary its quantiles,
// _sum and _count. A native histogram is sent as the classic series the
// text format shows for it (its _sum, _count and +Inf bucket, plus any
// classic buckets); native histogram samples are not sent yet. external
// labels are added to series that lack them. Each series goes to emit
// with its key and sorted labels, both in buffers reused for the next.
func flatten(mfs []*dto.MetricFamily, external []prompb.Label, emit func(key []byte, ls []prompb.Label, v float64)) {
	b := labelBuilder{external: external, emit: emit}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			b.reset(m.GetLabel())
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				b.add(name, "", "", m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				b.add(name, "", "", m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				b.add(name, "", "", m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				for _, bk := range h.GetBucket() {
					if math.IsInf(bk.GetUpperBound(), 1) {
						continue // written last, from the count, as the text format does
					}
					b.add(name+"_bucket", "le", formatFloat(bk.GetUpperBound()), float64(bk.GetCumulativeCount()))
				}
				b.add(name+"_bucket", "le", "+Inf", float64(h.GetSampleCount()))
				b.add(name+"_sum", "", "", h.GetSampleSum())
				b.add(name+"_count", "", "", float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					b.add(name, "quantile", formatFloat(q.GetQuantile()), q.GetValue())
				}
				b.add(name+"_sum", "", "", s.GetSampleSum())
				b.add(name+"_count", "", "", float64(s.GetSampleCount()))
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
	own      []prompb.Label // the metric's labels, sorted
	ls       []prompb.Label
	key      []byte
	emit     func(key []byte, ls []prompb.Label, v float64)
}

func (b *labelBuilder) reset(lps []*dto.LabelPair) {
	b.own = b.own[:0]
	for _, lp := range lps {
		b.own = append(b.own, prompb.Label{Name: lp.GetName(), Value: lp.GetValue()})
	}
	slices.SortFunc(b.own, func(x, y prompb.Label) int { return strings.Compare(x.Name, y.Name) })
}

// add emits the series name{own labels, extra=extraVal, external labels
// the series lacks} with value v.
func (b *labelBuilder) add(name, extra, extraVal string, v float64) {
	ls := append(b.ls[:0], prompb.Label{Name: "__name__", Value: name})
	ls = append(ls, b.own...)
	if extra != "" {
		ls = append(ls, prompb.Label{Name: extra, Value: extraVal})
	}
	for _, e := range b.external {
		if !slices.ContainsFunc(ls, func(l prompb.Label) bool { return l.Name == e.Name }) {
			ls = append(ls, e)
		}
	}
	slices.SortFunc(ls, func(x, y prompb.Label) int { return strings.Compare(x.Name, y.Name) })
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

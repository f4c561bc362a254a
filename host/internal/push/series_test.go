package push

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/guard"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// referenceFlatten is the label set rule in its plainest form, each
// series' labels built and sorted on their own: the family's labels whose
// value is not empty, the external labels of the names left, then the
// series' name and its le or quantile over any label of that name.
func referenceFlatten(fams []*guard.Family, external []prompb.Label) [][]prompb.Label {
	var out [][]prompb.Label
	set := func(ls []prompb.Label, name, value string) []prompb.Label {
		for i := range ls {
			if ls[i].Name == name {
				ls[i].Value = value
				return ls
			}
		}
		return append(ls, prompb.Label{Name: name, Value: value})
	}
	for _, f := range fams {
		for pi := range f.Parts {
			p := &f.Parts[pi]
			c := &p.Chunk
			for k := range p.Samples() {
				i := p.Index(k)
				var own []prompb.Label
				for j, ref := range c.LabelRefs(i) {
					if v := c.String(ref); v != "" {
						own = append(own, prompb.Label{Name: f.LabelNames[j], Value: v})
					}
				}
				for _, e := range external {
					if !slices.ContainsFunc(own, func(l prompb.Label) bool { return l.Name == e.Name }) {
						own = append(own, e)
					}
				}
				series := func(name, extra, extraVal string) {
					ls := set(slices.Clone(own), "__name__", name)
					if extra != "" {
						ls = set(ls, extra, extraVal)
					}
					slices.SortFunc(ls, func(x, y prompb.Label) int { return strings.Compare(x.Name, y.Name) })
					out = append(out, ls)
				}
				switch f.Type {
				case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
					bounds, _ := c.Buckets(i)
					for _, ub := range bounds {
						series(f.Name+"_bucket", "le", formatFloat(ub))
					}
					series(f.Name+"_bucket", "le", "+Inf")
					series(f.Name+"_sum", "", "")
					series(f.Name+"_count", "", "")
				case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
					qs, _ := c.Quantiles(i)
					for _, q := range qs {
						series(f.Name, "quantile", formatFloat(q))
					}
					series(f.Name+"_sum", "", "")
					series(f.Name+"_count", "", "")
				default:
					series(f.Name, "", "")
				}
			}
		}
	}
	return out
}

// TestFlattenLabelsMatchReference: the label sets flatten makes from its
// per-family plans are the reference's, series for series, and each key
// is its labels' (name 0xff value 0xff ...): empty values, label names
// before and after __name__, external labels the series has or lacks
// (one empty, one named le, one quantile), every kind of family.
func TestFlattenLabelsMatchReference(t *testing.T) {
	lp := func(kv ...string) []*dto.LabelPair {
		var out []*dto.LabelPair
		for i := 0; i < len(kv); i += 2 {
			out = append(out, &dto.LabelPair{Name: proto.String(kv[i]), Value: proto.String(kv[i+1])})
		}
		return out
	}
	var mfs []*dto.MetricFamily
	g := &dto.MetricFamily{Name: proto.String("g"), Help: proto.String("h"), Type: dto.MetricType_GAUGE.Enum()}
	for i := range 12 {
		v := func(s string, empty int) string {
			if i%empty == 0 {
				return ""
			}
			return s + fmt.Sprint(i)
		}
		g.Metric = append(g.Metric, &dto.Metric{
			Label: lp("Zone", v("z", 3), "instance", v("i", 2), "job", v("j", 5), "le", v("l", 4), "zz", v("x", 7), "device", fmt.Sprint(i)),
			Gauge: &dto.Gauge{Value: proto.Float64(float64(i))},
		})
	}
	c := &dto.MetricFamily{Name: proto.String("c_total"), Help: proto.String("h"), Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{
		{Counter: &dto.Counter{Value: proto.Float64(1)}},
		{Label: lp("a", "1"), Counter: &dto.Counter{Value: proto.Float64(2)}},
	}}
	h := &dto.MetricFamily{Name: proto.String("h_seconds"), Help: proto.String("h"), Type: dto.MetricType_HISTOGRAM.Enum()}
	s := &dto.MetricFamily{Name: proto.String("s_seconds"), Help: proto.String("h"), Type: dto.MetricType_SUMMARY.Enum()}
	for i := range 3 {
		h.Metric = append(h.Metric, &dto.Metric{Label: lp("path", fmt.Sprint("/", i), "job", []string{"", "x", "y"}[i]), Histogram: &dto.Histogram{
			SampleCount: proto.Uint64(4), SampleSum: proto.Float64(2.5),
			Bucket: []*dto.Bucket{{UpperBound: proto.Float64(0.5), CumulativeCount: proto.Uint64(1)}, {UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(3)}},
		}})
		s.Metric = append(s.Metric, &dto.Metric{Label: lp("path", fmt.Sprint("/", i), "Q", []string{"", "q"}[i%2]), Summary: &dto.Summary{
			SampleCount: proto.Uint64(4), SampleSum: proto.Float64(2.5),
			Quantile: []*dto.Quantile{{Quantile: proto.Float64(0.5), Value: proto.Float64(1)}, {Quantile: proto.Float64(0.99), Value: proto.Float64(math.Inf(1))}},
		}})
	}
	mfs = append(mfs, g, c, h, s)
	fams := merged(t, mfs)
	for _, external := range [][]prompb.Label{
		nil,
		{{Name: "instance", Value: "node1"}, {Name: "job", Value: "plexporter"}},
		{{Name: "A", Value: "a"}, {Name: "empty", Value: ""}, {Name: "instance", Value: "node1"}, {Name: "le", Value: "ext"}, {Name: "quantile", Value: "ext"}, {Name: "zzz", Value: "last"}},
	} {
		want := referenceFlatten(fams, external)
		var got [][]prompb.Label
		flatten(fams, external, func(key []byte, ls []prompb.Label, _ float64) {
			var k []byte
			for _, l := range ls {
				k = append(append(append(append(k, l.Name...), 0xff), l.Value...), 0xff)
			}
			if string(k) != string(key) {
				t.Errorf("external %v: key %q, labels %v", external, key, ls)
			}
			got = append(got, slices.Clone(ls))
		})
		if len(got) != len(want) {
			t.Fatalf("external %v: %d series, reference %d", external, len(got), len(want))
		}
		for i := range want {
			if !slices.EqualFunc(got[i], want[i], func(x, y prompb.Label) bool { return x.Name == y.Name && x.Value == y.Value }) {
				t.Errorf("external %v: series %d:\n got  %v\n want %v", external, i, got[i], want[i])
			}
		}
	}
}

// TestSymbolsOfRequests: a request's symbols table has each string of its
// series once, the empty string first and for empty values; a series let
// go of frees the strings only it used, and a string interned later in
// its place is named right in the next request.
func TestSymbolsOfRequests(t *testing.T) {
	tab := newTable()
	a := tab.ref([]byte("a"), []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "dev", Value: "a"}, {Name: "e", Value: ""}})
	b := tab.ref([]byte("b"), []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "dev", Value: "b"}})
	request := func(ids ...uint32) []string {
		for _, id := range ids {
			tab.symsOf(id)
		}
		y := &tab.syms
		syms := y.request()
		var out []string
		for _, id := range ids {
			for _, g := range y.of[id] {
				out = append(out, syms[y.symbolize(&syms, g)])
			}
		}
		if syms[0] != "" || len(syms) != len(slices.Compact(slices.Sorted(slices.Values(syms)))) {
			t.Errorf("symbols %q: not the empty string first, or a string twice", syms)
		}
		return out
	}
	if got := request(a, b); !slices.Equal(got, []string{"__name__", "m", "dev", "a", "e", "", "__name__", "m", "dev", "b"}) {
		t.Fatalf("first request: %q", got)
	}
	tab.release([]uint32{a})
	if _, ok := tab.syms.byStr["a"]; ok {
		t.Fatalf("after a's release, a is still interned: %v", tab.syms.byStr)
	}
	if _, ok := tab.syms.byStr["m"]; !ok {
		t.Fatalf("after a's release, b's m is gone: %v", tab.syms.byStr)
	}
	c := tab.ref([]byte("c"), []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "dev", Value: "c"}})
	if got := request(c, b); !slices.Equal(got, []string{"__name__", "m", "dev", "c", "__name__", "m", "dev", "b"}) {
		t.Fatalf("after a freed string's reuse: %q", got)
	}
}

// TestFlatMemoSnapshotsMatchFlatten pushes a sequence of snapshots whose
// chunks stay, change value, change label values, gain and lose series
// and families, and take a duplicate series: each snapshot must hold what
// flatten makes of its families (the memo's known series and the key
// path's alike), and a repeated snapshot must be made from the memo
// alone (no key built).
func TestFlatMemoSnapshotsMatchFlatten(t *testing.T) {
	dup := func(mfs []*dto.MetricFamily) []*dto.MetricFamily {
		g := gauges("node_temp_celsius", "a", "a")
		return append(g, mfs[1:]...)
	}
	rounds := [][]*dto.MetricFamily{
		mixed("a", "b"),
		mixed("a", "b"),
		mixed("a", "c"),
		append(gauges("early_family", "x"), mixed("a", "c")...),
		append(gauges("early_family", "x"), mixed("a", "c")...),
		mixed("a", "c"),
		mixed("c"),
		dup(mixed("a", "c")),
		mixed("a", "c"),
		mixed("a", "c"),
	}
	k := 0
	p := newPusher(t, "http://127.0.0.1:1", func(context.Context) []*dto.MetricFamily {
		mfs := rounds[k]
		for _, mf := range mfs { // a new value each round
			for _, m := range mf.Metric {
				if m.Gauge != nil {
					m.Gauge.Value = proto.Float64(float64(k) + 0.5)
				}
			}
		}
		return mfs
	}, func(c *config.Push) { c.MaxPendingSamples = 1 << 20 })
	for k = range rounds {
		p.Snapshot(context.Background())
		want := flattened(t, rounds[k], p.external)
		b := p.ring[len(p.ring)-1]
		if b.n < len(want) {
			t.Fatalf("round %d: %d samples, want at least %d", k, b.n, len(want))
		}
		for i, w := range want {
			got := p.tab.labels[b.ids[i]]
			if !slices.EqualFunc(got, w.labels, func(x, y prompb.Label) bool { return x.Name == y.Name && x.Value == y.Value }) || b.values[i] != w.value {
				t.Fatalf("round %d, series %d: %v = %v, want %v = %v", k, i, got, b.values[i], w.labels, w.value)
			}
		}
		for i := len(want); i < b.n; i++ {
			if !value.IsStaleNaN(b.values[i]) {
				t.Errorf("round %d: sample %d (%v) beyond the snapshot's series is %v, want a staleness marker", k, i, p.tab.labels[b.ids[i]], b.values[i])
			}
		}
	}

	// The memo at work: the same families twice, the second flatten
	// builds no key and numbers the series as the first.
	fams := merged(t, mixed("a", "b"))
	var memo flatMemo
	for round := range 2 {
		n := 0
		flattenInfo(fams, nil, nil, &memo, func(key []byte, b *labelBuilder, _ float64, _ seriesInfo) {
			if round == 1 && (key != nil || b.prev != n) {
				t.Fatalf("second flatten, series %d: key %q, prev %d: want no key, prev %d", n, key, b.prev, n)
			}
			memo.note(uint32(n))
			n++
		})
	}
}

package guard_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

var (
	up    = sdk.NewDesc("x_up", sdk.Gauge, "Up.", "dev")
	upAlt = sdk.NewDesc("x_up", sdk.Counter, "Up as counter.", "dev")
	bytes = sdk.NewDesc("x_bytes_total", sdk.Counter, "Bytes.", "dev")
)

func series(r *guard.Result, name string) []string {
	var out []string
	for _, f := range r.Families {
		if f.Name != name {
			continue
		}
		for _, p := range f.Parts {
			for k := range p.Samples() {
				i := p.Index(k)
				var lv []string
				for j := range p.Chunk.NumLabels() {
					lv = append(lv, p.Chunk.LabelValue(i, j))
				}
				out = append(out, strings.Join(lv, ","))
			}
		}
	}
	return out
}

func TestDuplicatesFirstWins(t *testing.T) {
	a := batchtest.Record(func(w *sdk.Writer) { w.Gauge(up, 1, "d0"); w.Gauge(up, 1, "d1"); w.Gauge(up, 2, "d0") })
	b := batchtest.Record(func(w *sdk.Writer) { w.Gauge(up, 3, "d1"); w.Gauge(up, 3, "d2") })
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}, {Plugin: "b", Batches: b}}, guard.Options{})
	if got := strings.Join(series(r, "x_up"), " "); got != "d0 d1 d2" {
		t.Fatalf("series = %q", got)
	}
	if r.Drops[guard.DropKey{"a", guard.ReasonDuplicate}] != 1 || r.Drops[guard.DropKey{"b", guard.ReasonDuplicate}] != 1 {
		t.Fatalf("drops = %v", r.Drops)
	}
	if r.Series["a"] != 2 || r.Series["b"] != 1 {
		t.Fatalf("series per plugin = %v", r.Series)
	}
	// the first value of a duplicated series wins
	f := r.Families[0]
	if v := f.Parts[0].Chunk.Value(f.Parts[0].Index(0)); v != 1 {
		t.Fatalf("first d0 value = %v", v)
	}
}

// A family's set of seen series is a slice up to 64 series and a map
// beyond (seenSet): duplicates are found on both sides of the switch, of
// series recorded before it and after, within one plugin and across two.
func TestDuplicatesFoundInSmallAndLargeFamilies(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 200} {
		a := batchtest.Record(func(w *sdk.Writer) {
			for i := range n {
				w.Gauge(up, float64(i), "d"+strconv.Itoa(i))
			}
			w.Gauge(up, -1, "d0")                  // recorded first
			w.Gauge(up, -1, "d"+strconv.Itoa(n-1)) // recorded last
		})
		b := batchtest.Record(func(w *sdk.Writer) {
			w.Gauge(up, -2, "d"+strconv.Itoa(n/2))
			w.Gauge(up, 1, "new")
		})
		r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}, {Plugin: "b", Batches: b}}, guard.Options{})
		if got := len(series(r, "x_up")); got != n+1 {
			t.Errorf("n=%d: %d series, want %d", n, got, n+1)
		}
		if r.Drops[guard.DropKey{"a", guard.ReasonDuplicate}] != 2 || r.Drops[guard.DropKey{"b", guard.ReasonDuplicate}] != 1 {
			t.Errorf("n=%d: drops = %v", n, r.Drops)
		}
		for _, p := range r.Families[0].Parts {
			for k := range p.Samples() {
				if v := p.Chunk.Value(p.Index(k)); v < 0 && p.Chunk.LabelValue(p.Index(k), 0) != "new" {
					t.Errorf("n=%d: a duplicate's value %v was kept over the first", n, v)
				}
			}
		}
	}
}

func TestConflictDropsLaterPlugin(t *testing.T) {
	a := batchtest.Record(func(w *sdk.Writer) { w.Gauge(up, 1, "d0") })
	b := batchtest.Record(func(w *sdk.Writer) { w.Counter(upAlt, 5, "d9"); w.Counter(bytes, 7, "d9") })
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}, {Plugin: "b", Batches: b}}, guard.Options{})
	if got := series(r, "x_up"); len(got) != 1 || got[0] != "d0" {
		t.Fatalf("x_up = %v", got)
	}
	if len(series(r, "x_bytes_total")) != 1 {
		t.Fatal("unrelated family of the conflicting plugin was lost")
	}
	k := guard.DropKey{"b", guard.ReasonConflict}
	if r.Drops[k] != 1 || !strings.Contains(r.Causes[k], "plugin a") {
		t.Fatalf("drops = %v causes = %v", r.Drops, r.Causes)
	}
}

func TestInvalidNamesAndValues(t *testing.T) {
	badName := sdk.NewDesc("9starts_with_digit", sdk.Gauge, "")
	badLabel := sdk.NewDesc("x_ok", sdk.Gauge, "", "__reserved")
	leLabel := sdk.NewDesc("x_hist", sdk.Histogram, "", "le")
	a := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(badName, 1)
		w.Gauge(badLabel, 1, "v")
		w.Histogram(leLabel, nil, nil, 1, 1, "x")
		w.Gauge(up, 1, "bad\xffutf8")
		w.Gauge(up, 1, strings.Repeat("x", 100))
		w.Gauge(up, 1, "fine")
	})
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}}, guard.Options{MaxLabelValueLen: 64})
	if got := series(r, "x_up"); len(got) != 1 || got[0] != "fine" {
		t.Fatalf("x_up = %v", got)
	}
	if len(r.Families) != 1 {
		t.Fatalf("families = %d, want only x_up", len(r.Families))
	}
	if r.Drops[guard.DropKey{"a", guard.ReasonInvalidName}] != 3 || r.Drops[guard.DropKey{"a", guard.ReasonInvalidValue}] != 2 {
		t.Fatalf("drops = %v", r.Drops)
	}
}

func TestSeriesCapCountsHistogramSeries(t *testing.T) {
	h := sdk.NewDesc("x_seconds", sdk.Histogram, "", "op")
	a := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(up, 1, "a")                                            // 1 series
		w.Histogram(h, []float64{1, 2}, []uint64{1, 2}, 3, 1, "read")  // 5 series
		w.Histogram(h, []float64{1, 2}, []uint64{1, 2}, 3, 1, "write") // would be 11
		w.Gauge(up, 1, "b")                                            // 7
	})
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a, MaxSeries: 7}}, guard.Options{})
	if r.Series["a"] != 7 || r.Drops[guard.DropKey{"a", guard.ReasonSeriesLimit}] != 1 {
		t.Fatalf("series %v drops %v", r.Series, r.Drops)
	}
}

func TestAllowlistIsNotADrop(t *testing.T) {
	a := batchtest.Record(func(w *sdk.Writer) { w.Gauge(up, 1, "a"); w.Counter(bytes, 1, "a") })
	f, _ := metricfilter.New([]string{"x_bytes"}, nil)
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}}, guard.Options{Filter: f})
	if len(r.Families) != 1 || r.Families[0].Name != "x_bytes_total" || len(r.Drops) != 0 {
		t.Fatalf("families %v drops %v", r.Families, r.Drops)
	}
}

// A family the catalogue says an event selects (selected_by) is kept when
// the allowlist names the event, NIXL style: the host's decision, whatever
// the plugin sends.
func TestAllowlistSelectsByEvent(t *testing.T) {
	last := sdk.NewDesc("agent_tx_last_bytes", sdk.Gauge, "", "agent_name")
	a := batchtest.Record(func(w *sdk.Writer) { w.Gauge(last, 1, "a"); w.Gauge(up, 1, "a") })
	f, _ := metricfilter.New([]string{"agent_tx_bytes"}, nil)
	by := guard.SelectedBy([]*pluginv1.MetricDescriptor{{Name: "agent_tx_last_bytes", SelectedBy: []string{"agent_tx_bytes"}}, {Name: "x_*", SelectedBy: []string{"x"}}}, "")
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a, SelectedBy: by}}, guard.Options{Filter: f})
	if len(r.Families) != 1 || r.Families[0].Name != "agent_tx_last_bytes" {
		t.Fatalf("families %v", r.Families)
	}
	if r = guard.Merge([]guard.Input{{Plugin: "a", Batches: a}}, guard.Options{Filter: f}); len(r.Families) != 0 {
		t.Fatalf("without selected_by the allowlist selects %v", r.Families)
	}
	if p := guard.SelectedBy([]*pluginv1.MetricDescriptor{{Name: "g", SelectedBy: []string{"e"}}}, "pre_"); len(p) != 1 || p["pre_g"][0] != "pre_e" {
		t.Fatalf("with a prefix: %v", p)
	}
}

func TestMalformedChunkDroppedOthersKept(t *testing.T) {
	a := batchtest.Record(func(w *sdk.Writer) { w.Gauge(up, 1, "a"); w.Counter(bytes, 1, "a") })
	a[0].Families[0].LabelValues = append(a[0].Families[0].LabelValues, 999) // garbage
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}}, guard.Options{})
	if len(r.Families) != 1 || r.Families[0].Name != "x_bytes_total" || r.Drops[guard.DropKey{"a", guard.ReasonMalformed}] != 1 {
		t.Fatalf("families %d drops %v", len(r.Families), r.Drops)
	}
	// empty string table is malformed, not a panic
	bad := []*pluginv1.Batch{{Families: []*pluginv1.FamilyChunk{{}}}}
	r = guard.Merge([]guard.Input{{Plugin: "z", Batches: bad}}, guard.Options{})
	if r.Drops[guard.DropKey{"z", guard.ReasonMalformed}] != 1 {
		t.Fatalf("drops %v", r.Drops)
	}
}

func TestSortedFamilies(t *testing.T) {
	r := guard.Merge([]guard.Input{{Plugin: "b", Batches: batchtest.Mix("b_", 100)}, {Plugin: "a", Batches: batchtest.Mix("a_", 100)}}, guard.Options{})
	for i := 1; i < len(r.Families); i++ {
		if r.Families[i-1].Name >= r.Families[i].Name {
			t.Fatalf("families not sorted: %s before %s", r.Families[i-1].Name, r.Families[i].Name)
		}
	}
}

func BenchmarkMerge100k(b *testing.B) {
	batches := batchtest.Mix("x_", 100000)
	b.ReportAllocs()
	for b.Loop() {
		guard.Merge([]guard.Input{{Plugin: "a", Batches: batches}}, guard.Options{MaxLabelValueLen: 2048})
	}
}

// Names are checked before reserved prefixes: an invalid name is
// invalid_name even under a reserved prefix; a valid one is a conflict.
func TestReservedPrefixIsAConflict(t *testing.T) {
	goUp := sdk.NewDesc("go_up", sdk.Gauge, "", "dev")
	goBad := sdk.NewDesc("go_bad", sdk.Gauge, "", "__dev")
	a := batchtest.Record(func(w *sdk.Writer) { w.Gauge(goUp, 1, "a"); w.Gauge(goBad, 1, "a"); w.Gauge(up, 1, "a") })
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a}}, guard.Options{ReservedPrefixes: []string{"plexporter_", "go_"}})
	if len(r.Families) != 1 || r.Families[0].Name != "x_up" {
		t.Fatalf("families %v", r.Families)
	}
	conflict, invalid := guard.DropKey{"a", guard.ReasonConflict}, guard.DropKey{"a", guard.ReasonInvalidName}
	if r.Drops[conflict] != 1 || r.Drops[invalid] != 1 || !strings.Contains(r.Causes[conflict], "prefix go_ is reserved") {
		t.Fatalf("drops %v causes %v", r.Drops, r.Causes)
	}
}

// The duplicate index hashes each string once per batch and combines the
// hashes per series: series made of the same values in another order, or
// of one value repeated, are distinct; a series repeated in a later batch,
// where its values have other string-table indexes, is a duplicate.
func TestDuplicatesByValueOrderAndAcrossBatches(t *testing.T) {
	pair := sdk.NewDesc("x_pair", sdk.Gauge, "Pair.", "a", "b")
	const n = 9000 // more than one batch (wire.DefaultBatchSamples)
	in := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(pair, 1, "p", "q")
		w.Gauge(pair, 1, "q", "p")
		w.Gauge(pair, 1, "p", "p")
		w.Gauge(pair, 1, "q", "q")
		w.Gauge(pair, 1, "pq", "")
		w.Gauge(pair, 1, "", "pq")
		for i := range n {
			w.Gauge(pair, 2, "v"+strconv.Itoa(i%97), strconv.Itoa(i))
		}
		w.Gauge(pair, -1, "q", "p")  // in the last batch
		w.Gauge(pair, -1, "v5", "5") // first sent in the first batch
	})
	if len(in) < 2 {
		t.Fatalf("%d batches, want at least 2", len(in))
	}
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: in}}, guard.Options{})
	if got := len(series(r, "x_pair")); got != 6+n {
		t.Errorf("%d series, want %d", got, 6+n)
	}
	if d := r.Drops[guard.DropKey{"a", guard.ReasonDuplicate}]; d != 2 {
		t.Errorf("%d duplicates dropped, want 2 (drops %v)", d, r.Drops)
	}
}

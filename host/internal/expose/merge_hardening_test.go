package expose_test

// The guard against garbage the SDK would not produce, or would not stop a
// plugin from producing: batches built by hand (and sent through the wire
// encoding), every case dropped by its documented rule, counted, and the
// exposition of what is left clean for promtool.

import (
	stdbytes "bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/host/internal/expose"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

const (
	tCounter   = pluginv1.MetricType_METRIC_TYPE_COUNTER
	tGauge     = pluginv1.MetricType_METRIC_TYPE_GAUGE
	tHistogram = pluginv1.MetricType_METRIC_TYPE_HISTOGRAM
	tSummary   = pluginv1.MetricType_METRIC_TYPE_SUMMARY
)

// builder hand-builds one batch: chunks name their strings, the builder
// interns them.
type builder struct {
	b     *pluginv1.Batch
	index map[string]uint32
}

func newBuilder() *builder {
	return &builder{b: &pluginv1.Batch{Strings: [][]byte{nil}}, index: map[string]uint32{"": 0}}
}

func (b *builder) str(s string) uint32 {
	if i, ok := b.index[s]; ok {
		return i
	}
	i := uint32(len(b.b.Strings))
	b.b.Strings = append(b.b.Strings, []byte(s))
	b.index[s] = i
	return i
}

// chunk adds a chunk of family name with one sample per entry of values;
// each sample's label values are labels[name]+"<i>".
func (b *builder) chunk(name string, typ pluginv1.MetricType, help string, labelNames []string, values []float64) *pluginv1.FamilyChunk {
	c := &pluginv1.FamilyChunk{Name: b.str(name), Type: typ, Help: b.str(help), Values: values}
	for _, l := range labelNames {
		c.LabelNames = append(c.LabelNames, b.str(l))
	}
	for i := range values {
		for _, l := range labelNames {
			c.LabelValues = append(c.LabelValues, b.str(fmt.Sprintf("%s%d", l, i)))
		}
	}
	b.b.Families = append(b.b.Families, c)
	return c
}

// histogram adds a histogram chunk with the given bounds and, per sample,
// its cumulative bucket counts and count.
func (b *builder) histogram(name string, bounds []float64, cum [][]uint64, counts []uint64) {
	c := b.chunk(name, tHistogram, "A histogram.", []string{"op"}, make([]float64, len(counts)))
	c.Bounds, c.Counts = bounds, counts
	for _, s := range cum {
		c.BucketCounts = append(c.BucketCounts, s...)
	}
}

func (b *builder) summary(name string, quantiles []float64) {
	c := b.chunk(name, tSummary, "A summary.", []string{"op"}, []float64{1})
	c.Bounds, c.Counts = quantiles, []uint64{1}
	c.QuantileValues = make([]float64, len(quantiles))
}

// wire sends the batch through the protobuf encoding, as a plugin would.
func (b *builder) wire(t *testing.T) []*pluginv1.Batch {
	t.Helper()
	buf, err := proto.Marshal(b.b)
	if err != nil {
		t.Fatal(err)
	}
	var got pluginv1.Batch
	if err := proto.Unmarshal(buf, &got); err != nil {
		t.Fatal(err)
	}
	return []*pluginv1.Batch{&got}
}

// exposed renders the merged families in the text format, checks that it
// parses and that promtool finds no error in it, and that OpenMetrics
// renders too; it returns the text.
func exposed(t *testing.T, r *guard.Result) string {
	t.Helper()
	var text stdbytes.Buffer
	if err := expose.Write(&text, expfmt.NewFormat(expfmt.TypeTextPlain), r.Families); err != nil {
		t.Fatal(err)
	}
	if err := expose.Write(io.Discard, expfmt.NewFormat(expfmt.TypeOpenMetrics), r.Families); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(stdbytes.NewReader(text.Bytes())); err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text.String())
	}
	sdktest.Promtool(t, text.String())
	return text.String()
}

func wantDrops(t *testing.T, r *guard.Result, plugin string, want map[string]int) {
	t.Helper()
	for reason, n := range want {
		if got := r.Drops[guard.DropKey{Plugin: plugin, Reason: reason}]; got != n {
			t.Errorf("drops{%s,%s} = %d, want %d (all drops %v, causes %v)", plugin, reason, got, n, r.Drops, r.Causes)
		}
	}
	for k, n := range r.Drops {
		if k.Plugin == plugin && want[k.Reason] == 0 {
			t.Errorf("unexpected drops{%s,%s} = %d (%s)", plugin, k.Reason, n, r.Causes[k])
		}
	}
}

func familyNames(r *guard.Result) string {
	var names []string
	for _, f := range r.Families {
		names = append(names, f.Name)
	}
	return strings.Join(names, " ")
}

func TestHistogramGarbage(t *testing.T) {
	b := newBuilder()
	one := [][]uint64{{1, 2}}
	b.histogram("h_ok_seconds", []float64{1, 2}, [][]uint64{{1, 2}, {0, 0}, {2, 2}}, []uint64{3, 0, 2})
	b.histogram("h_inf_seconds", []float64{1, math.Inf(1)}, one, []uint64{2})
	b.histogram("h_nan_seconds", []float64{math.NaN(), 1}, one, []uint64{2})
	b.histogram("h_nan_last_seconds", []float64{1, math.NaN()}, one, []uint64{2})
	b.histogram("h_duplicate_seconds", []float64{1, 1}, one, []uint64{2})
	b.histogram("h_descending_seconds", []float64{2, 1}, one, []uint64{2})
	// Per sample: decreasing counts, and a bucket above the count.
	b.histogram("h_counts_seconds", []float64{1, 2}, [][]uint64{{1, 2}, {3, 2}, {1, 5}, {0, 0}}, []uint64{2, 3, 4, 0})
	// -Inf is a legal bound; none at all is a legal histogram.
	b.histogram("h_minus_inf_seconds", []float64{math.Inf(-1), 0}, [][]uint64{{0, 1}}, []uint64{1})
	b.histogram("h_no_buckets_seconds", nil, [][]uint64{nil}, []uint64{4})
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: b.wire(t)}}, guard.Options{})
	wantDrops(t, r, "p", map[string]int{guard.ReasonInvalidHistogram: 5 + 2})
	if got := familyNames(r); got != "h_counts_seconds h_minus_inf_seconds h_no_buckets_seconds h_ok_seconds" {
		t.Fatalf("families %q", got)
	}
	if got := mergedSeries(r, "h_counts_seconds"); strings.Join(got, " ") != "op0 op3" {
		t.Fatalf("h_counts_seconds kept %v, want the samples with cumulative counts", got)
	}
	exposed(t, r)
}

func TestSummaryGarbage(t *testing.T) {
	b := newBuilder()
	b.summary("s_ok_seconds", []float64{0, 0.5, 1})
	b.summary("s_unordered_seconds", []float64{0.9, 0.5, 0.99}) // no order is required
	b.summary("s_nan_seconds", []float64{0.5, math.NaN()})
	b.summary("s_above_one_seconds", []float64{1.5})
	b.summary("s_negative_seconds", []float64{-0.1})
	b.summary("s_twice_seconds", []float64{0.5, 0.5})
	b.summary("s_twice_unordered_seconds", []float64{0.9, 0.5, 0.9})
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: b.wire(t)}}, guard.Options{})
	wantDrops(t, r, "p", map[string]int{guard.ReasonInvalidSummary: 5})
	if got := familyNames(r); got != "s_ok_seconds s_unordered_seconds" {
		t.Fatalf("families %q", got)
	}
	exposed(t, r)
}

func TestNameCollisions(t *testing.T) {
	// Plugins merge in name order, so a's families come first and win.
	a, b := newBuilder(), newBuilder()
	a.histogram("x", []float64{1}, [][]uint64{{1}}, []uint64{1})
	b.chunk("x_bucket", tGauge, "", []string{"le"}, []float64{1}) // read as x's bucket
	b.chunk("x_count", tGauge, "", nil, []float64{1})
	b.chunk("x_created", tGauge, "", nil, []float64{1}) // OpenMetrics: x's created timestamp
	a.chunk("y", tCounter, "", nil, []float64{1})       // OpenMetrics exposes y_total
	b.chunk("y_total", tGauge, "", nil, []float64{1})
	a.chunk("z_total", tCounter, "", nil, []float64{1})
	b.chunk("z_created", tGauge, "", nil, []float64{1})
	a.summary("s", []float64{0.5})
	b.histogram("s_sum", []float64{1}, [][]uint64{{1}}, []uint64{1}) // its TYPE line names s's _sum
	b.summary("q_created", []float64{0.5})                           // quantile series read as a created timestamp
	// Not collisions: a counter's OpenMetrics family name next to a gauge
	// (client_golang's Go collector does it), and suffixed gauges beside
	// gauges.
	a.chunk("m_bytes_total", tCounter, "", nil, []float64{1})
	b.chunk("m_bytes", tGauge, "", nil, []float64{1})
	a.chunk("g", tGauge, "", nil, []float64{1})
	b.chunk("g_count", tGauge, "", nil, []float64{1})
	b.chunk("g_sum", tGauge, "", nil, []float64{1})
	r := guard.Merge([]guard.Input{{Plugin: "a", Batches: a.wire(t)}, {Plugin: "b", Batches: b.wire(t)}}, guard.Options{})
	wantDrops(t, r, "a", nil)
	wantDrops(t, r, "b", map[string]int{guard.ReasonNameCollision: 7})
	if got := familyNames(r); got != "g g_count g_sum m_bytes m_bytes_total s x y z_total" {
		t.Fatalf("families %q", got)
	}
	k := guard.DropKey{Plugin: "b", Reason: guard.ReasonNameCollision}
	if !strings.Contains(r.Causes[k], "family x_bucket (gauge) would expose x_bucket, a series name of family x (histogram)") {
		t.Errorf("cause %q", r.Causes[k])
	}
	exposed(t, r)

	// Within one plugin the family that comes first wins, and a family that
	// lost is dropped in every later chunk too.
	c := newBuilder()
	c.chunk("w_bucket", tGauge, "", nil, []float64{1})
	c.histogram("w", []float64{1}, [][]uint64{{1}}, []uint64{1})
	c.histogram("w", []float64{1}, [][]uint64{{1}}, []uint64{1})
	r = guard.Merge([]guard.Input{{Plugin: "c", Batches: c.wire(t)}}, guard.Options{})
	wantDrops(t, r, "c", map[string]int{guard.ReasonNameCollision: 2})
	if got := familyNames(r); got != "w_bucket" {
		t.Fatalf("families %q", got)
	}
	exposed(t, r)
}

// A plugin family whose series names would have a host prefix is a
// conflict like a family name with one.
func TestSeriesNamesWithReservedPrefix(t *testing.T) {
	b := newBuilder()
	b.chunk("go", tCounter, "", nil, []float64{1}) // go_total
	b.histogram("plexporter", nil, [][]uint64{nil}, []uint64{1})
	b.chunk("gopher", tGauge, "", nil, []float64{1})
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: b.wire(t)}}, guard.Options{ReservedPrefixes: []string{"plexporter_", "go_"}})
	wantDrops(t, r, "p", map[string]int{guard.ReasonConflict: 2})
	if got := familyNames(r); got != "gopher" {
		t.Fatalf("families %q", got)
	}
}

func TestNameHelpAndLabelLimits(t *testing.T) {
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	labels := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("l%d", i)
		}
		return out
	}
	b := newBuilder()
	// At the limits: kept.
	b.chunk(long("n_", guard.MaxNameLen), tGauge, strings.Repeat("h", guard.MaxHelpLen), []string{long("l_", guard.MaxNameLen)}, []float64{1})
	b.chunk("n_labels", tGauge, "", labels(guard.MaxLabels), []float64{1, 2})
	// Past them: dropped.
	b.chunk(long("n_", guard.MaxNameLen+1), tGauge, "", nil, []float64{1})
	b.chunk("n_long_label", tGauge, "", []string{long("l_", guard.MaxNameLen+1)}, []float64{1})
	b.chunk("n_too_many_labels", tGauge, "", labels(guard.MaxLabels+1), []float64{1, 2, 3})
	b.chunk("n_long_help", tGauge, strings.Repeat("h", guard.MaxHelpLen+1), nil, []float64{1})
	b.chunk("n_bad_help", tGauge, "bad \xff help", nil, []float64{1})
	c := b.chunk("n_bad_unit", tGauge, "", nil, []float64{1})
	c.Unit = b.str("\xfe")
	b.chunk("n_bad\xffname", tGauge, "", nil, []float64{1})
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: b.wire(t)}}, guard.Options{})
	wantDrops(t, r, "p", map[string]int{guard.ReasonInvalidName: 3, guard.ReasonLabelLimit: 3, guard.ReasonMalformed: 3})
	if got := familyNames(r); got != "n_labels "+long("n_", guard.MaxNameLen) {
		t.Fatalf("families %q", got)
	}
	for k, cause := range r.Causes {
		if len(cause) > 600 {
			t.Errorf("cause of %v is %d bytes; causes quote plugin strings and must stay short", k, len(cause))
		}
	}
	exposed(t, r)
}

// Invalid UTF-8 costs the series that use the string, nothing else — here
// as a plugin not built on the Go SDK sends it, in the string field of the
// first release's declaration.
func TestInvalidUTF8FromTheWire(t *testing.T) {
	var wire []byte
	for _, s := range []string{"", "u_up", "dev", "bad\xffvalue", "good", "Help."} {
		wire = protowire.AppendTag(wire, 1, protowire.BytesType)
		wire = protowire.AppendString(wire, s)
	}
	chunk := &pluginv1.FamilyChunk{Name: 1, Type: tGauge, Help: 5, LabelNames: []uint32{2}, LabelValues: []uint32{3, 4, 3}, Values: []float64{1, 2, 3}}
	enc, err := proto.Marshal(chunk)
	if err != nil {
		t.Fatal(err)
	}
	wire = protowire.AppendTag(wire, 2, protowire.BytesType)
	wire = protowire.AppendBytes(wire, enc)
	var b pluginv1.Batch
	if err := proto.Unmarshal(wire, &b); err != nil {
		t.Fatalf("a batch with an invalid string does not decode: %v", err)
	}
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: []*pluginv1.Batch{&b}}}, guard.Options{})
	wantDrops(t, r, "p", map[string]int{guard.ReasonInvalidValue: 2})
	if got := mergedSeries(r, "u_up"); strings.Join(got, " ") != "good" {
		t.Fatalf("u_up = %v", got)
	}
	exposed(t, r)
}

// The byte budget that comes with the series cap: batches past it are not
// exposed, and count as series_limit drops.
func TestByteBudget(t *testing.T) {
	d := sdk.NewDesc("b_info", sdk.Gauge, "", "blob")
	var batches []*pluginv1.Batch
	for i := range 4 {
		// 1.5 MiB per batch; the budget for a cap of 20 series is MinBytes (4 MiB).
		batches = append(batches, batchtest.Record(func(w *sdk.Writer) {
			w.Gauge(d, 1, strings.Repeat(string(rune('a'+i)), 3<<19))
			w.Gauge(d, 1, fmt.Sprint(i))
		})...)
	}
	if wire.LimitsFor(20).MaxBytes != 4<<20 {
		t.Fatalf("budget %d: this test expects 4 MiB", wire.LimitsFor(20).MaxBytes)
	}
	r := guard.Merge([]guard.Input{{Plugin: "p", Batches: batches, MaxSeries: 20}}, guard.Options{})
	wantDrops(t, r, "p", map[string]int{guard.ReasonSeriesLimit: 4})
	if r.Series["p"] != 4 || len(mergedSeries(r, "b_info")) != 4 {
		t.Fatalf("%d series exposed, want the first two batches' 4", r.Series["p"])
	}
	if c := r.Causes[guard.DropKey{Plugin: "p", Reason: guard.ReasonSeriesLimit}]; !strings.Contains(c, "more than 4 MiB") {
		t.Errorf("cause %q", c)
	}
}

// flood is a stream of gauge batches that never ends.
type flood struct{ sent int }

func (f *flood) Recv() (*pluginv1.CollectResponse, error) {
	d := sdk.NewDesc("f_value", sdk.Gauge, "", "i")
	return &pluginv1.CollectResponse{Batch: batchtest.Record(func(w *sdk.Writer) {
		for range 1000 {
			w.Gauge(d, 1, fmt.Sprint(f.sent))
			f.sent++
		}
	})[0]}, nil
}

// Drain stops receiving past the cap and the guard exposes exactly the cap:
// together they bound the host's memory and count what was cut.
func TestDrainAndGuardAgreeOnTheCap(t *testing.T) {
	for _, limit := range []int{1, 999, 1000, 1001, 2500} {
		f := &flood{}
		batches, _, err := wire.Drain(f, wire.LimitsFor(limit))
		if err != nil {
			t.Fatal(err)
		}
		r := guard.Merge([]guard.Input{{Plugin: "p", Batches: batches, MaxSeries: limit}}, guard.Options{})
		if r.Series["p"] != limit {
			t.Errorf("cap %d: %d series exposed", limit, r.Series["p"])
		}
		if got := r.Drops[guard.DropKey{Plugin: "p", Reason: guard.ReasonSeriesLimit}]; got != f.sent-limit || got == 0 {
			t.Errorf("cap %d: received %d, %d series_limit drops, want the %d past the cap", limit, f.sent, got, f.sent-limit)
		}
		if f.sent > limit+1000 {
			t.Errorf("cap %d: %d series received; Drain must stop at the batch crossing the cap", limit, f.sent)
		}
	}
}

// mergedSeries lists the label values of every series of one merged family.
func mergedSeries(r *guard.Result, name string) []string {
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

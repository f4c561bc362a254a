package expose

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/sdk"
)

// reference renders families with expfmt from client_model.
func reference(t testing.TB, fams []*guard.Family, format expfmt.Format) []byte {
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range ToDTO(fams) {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("expfmt: %v", err)
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		c.Close()
	}
	return buf.Bytes()
}

func parseText(t testing.TB, b []byte) map[string]*dto.MetricFamily {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return mfs
}

func render(t testing.TB, fams []*guard.Family, format expfmt.Format) []byte {
	var buf bytes.Buffer
	if err := Write(&buf, format, fams); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func edgeCases() []*guard.Family {
	esc := sdk.NewDesc("edge_info", sdk.Gauge, "Help with \\ backslash\nand \"quotes\".", "a", "b")
	ctr := sdk.NewDesc("edge_events_total", sdk.Counter, "", "kind")
	noTotal := sdk.NewDesc("edge_legacy_counter", sdk.Counter, "Legacy.")
	untyped := sdk.NewDesc("edge_untyped", sdk.Untyped, "U.")
	h := sdk.NewDesc("edge_seconds", sdk.Histogram, "H.", "op").WithUnit("seconds")
	s := sdk.NewDesc("edge_rtt_seconds", sdk.Summary, "S.")
	batches := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(esc, 1, "quote\"d", "new\nline\\back")
		w.Gauge(esc, math.NaN(), "", "ünïcode")
		w.Gauge(esc, math.Inf(-1), "x", "y")
		w.Counter(ctr, 0, "zero")
		w.Counter(ctr, 1e21, "big")
		w.Counter(ctr, 123456789012, "int")
		w.Counter(ctr, -1, "neg")
		w.Counter(ctr, 0.1, "frac")
		w.Counter(noTotal, 5)
		w.Untyped(untyped, 2.5)
		w.Histogram(h, []float64{0.001, 0.5, 1, 1e3}, []uint64{0, 2, 3, 3}, 4, 1700.25, "read")
		w.Histogram(h, []float64{0.001, 0.5, 1, 1e3}, []uint64{1, 1, 1, 1}, 1, 0.0005, "write")
		w.Summary(s, []float64{0.5, 0.99}, []float64{0.25, math.NaN()}, 9, 3.5)
	})
	return guard.Merge([]guard.Input{{Plugin: "p", Batches: batches}}, guard.Options{}).Families
}

// TestTextEquivalentToExpfmt proves the direct writer and expfmt produce the
// same families (compared after parsing both).
func TestTextEquivalentToExpfmt(t *testing.T) {
	for name, fams := range map[string][]*guard.Family{
		"edge":   edgeCases(),
		"mix":    guard.Merge([]guard.Input{{Plugin: "p", Batches: batchtest.Mix("m_", 2000)}}, guard.Options{}).Families,
		"native": nativeCases(),
	} {
		t.Run(name, func(t *testing.T) {
			got := render(t, fams, expfmt.FmtText)
			want := reference(t, fams, expfmt.FmtText)
			if !bytes.Equal(got, want) {
				// byte equality is the goal; semantic equality the requirement
				g, w := parseText(t, got), parseText(t, want)
				for k := range w {
					if !proto.Equal(g[k], w[k]) {
						t.Errorf("family %s differs:\n got %v\nwant %v", k, g[k], w[k])
					}
				}
				if len(g) != len(w) {
					t.Errorf("got %d families, want %d", len(g), len(w))
				}
			}
		})
	}
}

func TestOpenMetricsEquivalentToExpfmt(t *testing.T) {
	fams := edgeCases()
	got := string(render(t, fams, expfmt.FmtOpenMetrics_1_0_0))
	want := string(reference(t, fams, expfmt.FmtOpenMetrics_1_0_0))
	if !strings.HasSuffix(got, "# EOF\n") {
		t.Fatal("OpenMetrics output lacks # EOF")
	}
	if got != want {
		t.Fatalf("OpenMetrics differs from expfmt:\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// The direct protobuf writer must produce exactly expfmt's bytes for the
// client_model families wire.Families builds.
func TestProtobufEquivalentToExpfmt(t *testing.T) {
	for name, fams := range map[string][]*guard.Family{
		"edge":   edgeCases(),
		"mix":    guard.Merge([]guard.Input{{Plugin: "p", Batches: batchtest.Mix("m_", 2000)}}, guard.Options{}).Families,
		"native": nativeCases(),
	} {
		got := render(t, fams, expfmt.FmtProtoDelim)
		want := reference(t, fams, expfmt.FmtProtoDelim)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: protobuf differs from expfmt (%d vs %d bytes)", name, len(got), len(want))
		}
	}
}

func TestProtobufRoundTrip(t *testing.T) {
	fams := edgeCases()
	b := render(t, fams, expfmt.FmtProtoDelim)
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.FmtProtoDelim)
	var names []string
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		names = append(names, mf.GetName())
	}
	var want []string
	for _, f := range fams {
		want = append(want, f.Name)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("protobuf families %v, want %v", names, want)
	}
}

// FuzzTextEquivalence feeds arbitrary label values, help texts and values
// through both writers; fz_pair's samples repeat and change the value at
// each label position, as the text writer's reuse of the labels rendered
// for the sample before needs.
func FuzzTextEquivalence(f *testing.F) {
	f.Add("v", "help", 1.5, uint64(3))
	f.Add("quo\"te\\n", "multi\nline \\", math.Inf(1), uint64(0))
	f.Add("", "", math.Copysign(0, -1), uint64(1<<63)) // -0.0 in Go source is +0
	f.Fuzz(func(t *testing.T, label, help string, v float64, cnt uint64) {
		g := sdk.NewDesc("fz_value", sdk.Gauge, help, "l")
		h := sdk.NewDesc("fz_seconds", sdk.Histogram, help, "l")
		pair := sdk.NewDesc("fz_pair", sdk.Gauge, help, "a", "b")
		batches := batchtest.Record(func(w *sdk.Writer) {
			w.Gauge(g, v, label)
			w.Gauge(pair, v, label, "x")
			w.Gauge(pair, v, label, label+"y")
			w.Gauge(pair, v, "x", label)
			w.Gauge(pair, v, "x", label+"\n")
			w.Gauge(pair, v, label+"\"", "x")
			w.Histogram(h, []float64{v}, []uint64{cnt}, cnt, v, label)
		})
		fams := guard.Merge([]guard.Input{{Plugin: "p", Batches: batches}}, guard.Options{}).Families
		got := render(t, fams, expfmt.FmtText)
		if len(fams) == 0 {
			return // invalid UTF-8 label value: guarded away
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return // not a valid bucket bound; expfmt and we agree on the gauge only
		}
		want := reference(t, fams, expfmt.FmtText)
		if !bytes.Equal(got, want) {
			t.Fatalf("text differs:\n got %q\nwant %q", got, want)
		}
		if got, want := render(t, fams, expfmt.FmtProtoDelim), reference(t, fams, expfmt.FmtProtoDelim); !bytes.Equal(got, want) {
			t.Fatalf("protobuf differs:\n got %x\nwant %x", got, want)
		}
	})
}

func BenchmarkEncode100k(b *testing.B) {
	fams := guard.Merge([]guard.Input{{Plugin: "p", Batches: batchtest.Mix("m_", 100000)}}, guard.Options{}).Families
	for _, bc := range []struct {
		name   string
		format expfmt.Format
	}{{"text", expfmt.FmtText}, {"openmetrics", expfmt.FmtOpenMetrics_1_0_0}, {"protobuf", expfmt.FmtProtoDelim}} {
		b.Run(bc.name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := Write(&buf, bc.format, fams); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(buf.Len()))
		})
	}
	b.Run("expfmt-text-baseline", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			for _, mf := range ToDTO(fams) {
				expfmt.MetricFamilyToText(&buf, mf)
			}
		}
		b.SetBytes(int64(buf.Len()))
	})
}

// ToDTO converts merged families to client_model families: the reference
// the tests compare the formats with.
func ToDTO(fams []*guard.Family) []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, len(fams))
	for i, f := range fams {
		out[i] = toDTO(f)
	}
	return out
}

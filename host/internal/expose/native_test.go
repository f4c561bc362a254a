package expose

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
)

func nativeCases() []*guard.Family {
	return guard.Merge([]guard.Input{{Plugin: "p", Batches: batchtest.Natives("n_")}}, guard.Options{}).Families
}

// decodeProto decodes the delimited protobuf exposition into its families'
// metrics by their op label.
func decodeProto(t *testing.T, b []byte) map[string]*dto.Histogram {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.FmtProtoDelim)
	out := map[string]*dto.Histogram{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetHistogram()
		}
	}
	return out
}

// The protobuf exposition carries the native histogram, with the classic
// buckets only when the plugin sent them; the equivalence with expfmt is
// TestProtobufEquivalentToExpfmt's "native" case.
func TestProtobufCarriesNativeHistograms(t *testing.T) {
	h := decodeProto(t, render(t, nativeCases(), expfmt.FmtProtoDelim))
	only := h["only"]
	if only.GetSchema() != 0 || only.GetSampleCount() != 10 || only.GetSampleSum() != 1.75 || len(only.GetBucket()) != 0 {
		t.Errorf("native-only: %v", only)
	}
	if sp := only.GetPositiveSpan(); len(sp) != 2 || sp[0].GetOffset() != -3 || sp[0].GetLength() != 2 || sp[1].GetOffset() != 3 || sp[1].GetLength() != 2 {
		t.Errorf("native-only spans: %v", sp)
	}
	if d := only.GetPositiveDelta(); len(d) != 4 || d[0] != 1 || d[1] != 3 || d[2] != -2 || d[3] != 1 {
		t.Errorf("native-only deltas: %v", d)
	}
	both := h["both"]
	if both.GetSchema() != 3 || both.GetZeroThreshold() != 1e-9 || both.GetZeroCount() != 2 || len(both.GetNegativeSpan()) != 1 ||
		both.GetNegativeSpan()[0].GetOffset() != -1 || len(both.GetBucket()) != 3 || both.GetBucket()[1].GetCumulativeCount() != 6 {
		t.Errorf("native with classic buckets: %v", both)
	}
	if sp := h["empty"].GetPositiveSpan(); len(sp) != 1 || sp[0].GetOffset() != 0 || sp[0].GetLength() != 0 || h["empty"].GetSchema() != -4 {
		t.Errorf("empty native histogram: %v, want the no-op span", h["empty"])
	}
	if c := h["classic"]; c.Schema != nil || len(c.GetPositiveSpan()) != 0 || len(c.GetBucket()) != 2 {
		t.Errorf("classic histogram: %v", c)
	}
}

// Text and OpenMetrics scrapers get the classic buckets; a native-only
// histogram is its +Inf bucket, _sum and _count there.
func TestTextGetsClassicBuckets(t *testing.T) {
	fams := nativeCases()
	text := string(render(t, fams, expfmt.FmtText))
	for _, want := range []string{
		`n_native_seconds_bucket{op="only",le="+Inf"} 10`,
		`n_native_seconds_sum{op="only"} 1.75`,
		`n_native_seconds_count{op="only"} 10`,
		`n_native_seconds_bucket{op="both",le="0"} 3`,
		`n_native_seconds_bucket{op="both",le="1"} 6`,
		`n_native_seconds_bucket{op="both",le="+Inf"} 7`,
		`n_native_seconds_bucket{op="classic",le="0.5"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("text exposition lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `op="only",le="0`) {
		t.Errorf("a native-only histogram got finite classic buckets in text:\n%s", text)
	}
	om := string(render(t, fams, expfmt.FmtOpenMetrics_1_0_0))
	if !strings.Contains(om, `n_native_seconds_bucket{op="both",le="1.0"} 6`+"\n") {
		t.Errorf("OpenMetrics lacks the classic buckets:\n%s", om)
	}
}

// promtool, Prometheus's own linter, finds nothing wrong with the text
// exposition of native histograms.
func TestPromtoolChecksNativeText(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	f := filepath.Join(t.TempDir(), "metrics")
	if err := os.WriteFile(f, render(t, nativeCases(), expfmt.FmtText), 0o644); err != nil {
		t.Fatal(err)
	}
	in, _ := os.Open(f)
	defer in.Close()
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

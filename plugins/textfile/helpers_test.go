package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fixedNow is the clock of the tests; fixedMtime is the mtime they give
// their files.
var (
	fixedNow   = time.Unix(1767229200, 0)
	fixedMtime = time.Unix(1767225600, 0)
)

// testPlugin returns a plugin on the fixed clock.
func testPlugin() *plugin {
	p := newPlugin()
	p.now = func() time.Time { return fixedNow }
	return p
}

// dirWith makes a 0755 directory holding files (name → content), each
// 0644 with mtime fixedMtime.
func dirWith(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "textfile")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // the umask may have taken bits away
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content, fixedMtime)
	}
	return dir
}

func writeFile(t testing.TB, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// opts configures the plugin to read dirs.
func opts(dirs ...string) sdktest.Options {
	return sdktest.Options{Config: map[string]any{"directories": toAny(dirs)}}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// samples renders every sample of mfs as "name{labels} value" keys
// (labels sorted; summaries and histograms one key per line of the text
// format), mapped to their values.
func samples(mfs []*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			ls := labelsOf(m)
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(name, ls)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(name, ls)] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[key(name, ls)] = m.GetUntyped().GetValue()
			case dto.MetricType_SUMMARY:
				for _, q := range m.GetSummary().GetQuantile() {
					out[key(name, append(slices.Clone(ls), "quantile="+fmtFloat(q.GetQuantile())))] = q.GetValue()
				}
				out[key(name+"_sum", ls)] = m.GetSummary().GetSampleSum()
				out[key(name+"_count", ls)] = float64(m.GetSummary().GetSampleCount())
			case dto.MetricType_HISTOGRAM:
				for _, b := range m.GetHistogram().GetBucket() {
					out[key(name+"_bucket", append(slices.Clone(ls), "le="+fmtFloat(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				out[key(name+"_sum", ls)] = m.GetHistogram().GetSampleSum()
				out[key(name+"_count", ls)] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func labelsOf(m *dto.Metric) []string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	return ls
}

func key(name string, labels []string) string {
	ls := slices.Clone(labels)
	slices.Sort(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func helps(mfs []*dto.MetricFamily) map[string]string {
	out := map[string]string{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetHelp()
	}
	return out
}

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fixedNow is the clock of the golden runs: one hour after the fixture VM's
// launched_at (1767225600.25).
var fixedNow = time.Unix(1767229200, 250_000_000)

// runDirPlugin returns a plugin whose clock is fixedNow and whose process
// environment is empty, and the options that point it at an unpacked
// fixture: <root>/run/rocm-ernic under Rootfs, <root>/proc as procfs (pids
// 2101, 2102 and the VM's 2201 exist; instance 3's 999999 does not).
func runDirPlugin(t *testing.T, archive string) (*plugin, sdktest.Options, string) {
	t.Helper()
	root := sdktest.Unpack(t, archive)
	p := newPlugin()
	p.now = func() time.Time { return fixedNow }
	p.getenv = func(string) string { return "" }
	return p, sdktest.Options{Rootfs: root, Procfs: filepath.Join(root, "proc")}, root
}

func TestGolden(t *testing.T) {
	p, opts, _ := runDirPlugin(t, "testdata/ernic-run.ttar")
	text := sdktest.CleanGolden(t, sdktest.Run(t, p, opts), "testdata/ernic-run.golden")
	sdktest.Contains(t, text,
		`ernic_instance_uptime_seconds{ernic_id="1",role="manager"} 10000.5`+"\n",
		`ernic_instance_uptime_seconds{ernic_id="2",role="worker"} 9950.5`+"\n",
		`ernic_vm_uptime_seconds{ernic_id="1",role="manager"} 3600`+"\n",
		`ernic_stats_torn_reads_total{ernic_id="3",role="worker"} 0`+"\n",
		`ernic_orphan_stats_files 0`+"\n")
	sdktest.Lacks(t, text, `ernic_instance_uptime_seconds{ernic_id="3"`, `ernic_vm_uptime_seconds{ernic_id="3"`)
}

// TestExpectedSamples compares the output with the reference list of
// ernic-exporter's samples for the shared run directory, as numbers: every
// reference sample with its value, and no ernic_ sample the reference
// lacks (the time-dependent uptimes are the only ones it leaves out).
func TestExpectedSamples(t *testing.T) {
	p, opts, _ := runDirPlugin(t, "testdata/ernic-run.ttar")
	res := sdktest.Run(t, p, opts)
	got := map[string]float64{}
	for _, mf := range res.Families(t) {
		// ernic-exporter's families only: not the plugin's own health
		// families, which the reference has no counterpart of.
		if !strings.HasPrefix(mf.GetName(), "ernic_") || strings.HasSuffix(mf.GetName(), "_uptime_seconds") || ownFamilies[mf.GetName()] {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[sampleKey(mf.GetName(), m.GetLabel())] = sampleValue(m)
		}
	}
	want := parseExpected(t, "testdata/ernic-run.expected")
	if len(want) != 327 { // 335 lines, 8 of them comments
		t.Fatalf("reference has %d samples, want 327", len(want))
	}
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("missing %s (want %v)", k, v)
		case g != v:
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("extra sample %s %v", k, v)
		}
	}
}

// TestPromtool: the output passes promtool check metrics. Two of
// ernic-exporter's names draw lint findings and stay, since dashboards and
// alerts query them (README, "Names"); any other finding fails.
func TestPromtool(t *testing.T) {
	p, opts, _ := runDirPlugin(t, "testdata/ernic-run.ttar")
	text := sdktest.Run(t, p, opts).Text(t)
	sdktest.PromtoolClean(t, text, promtoolExceptions)
}

// promtoolExceptions are the names promtool objects to that stay, because
// they are ernic-exporter's and its dashboards and alerts query them.
var promtoolExceptions = map[string]string{
	"ernic_lif_counter_total": "ernic-exporter's name: should not include type 'counter'",
	"ernic_qp_count":          `ernic-exporter's name (a gauge of QPs): should not have a "_count" suffix`,
}

// parseExpected reads a reference list, "<metric>{<labels>} <value>" lines
// and # comments, which is a valid text exposition of untyped samples.
func parseExpected(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[sampleKey(name, m.GetLabel())] = sampleValue(m)
		}
	}
	return out
}

// sampleKey renders a series with its labels sorted, so that the label
// order of either side does not matter.
func sampleKey(name string, labels []*dto.LabelPair) string {
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+`"`+l.GetValue()+`"`)
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// ownFamilies are the plugin's health families, in ernic_* since the
// plugin's rename from ionic (ionic_* is the ethtool plugin's), and not
// ernic-exporter's.
var ownFamilies = map[string]bool{
	"ernic_collection_errors_total": true,
	"ernic_stats_torn_reads_total":  true,
	"ernic_orphan_stats_files":      true,
}

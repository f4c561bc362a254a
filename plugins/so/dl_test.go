//go:build cgo

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// These tests load real shared objects into the test process, so only
// well-behaved ones: the crashing, hanging and leaking collectors run under
// the real host (host_test.go). One exception, hang.c in
// TestGivenUpCollectKeepsStagedSamples: its thread sleeps, harmless.

func TestCollectsFromACCollector(t *testing.T) {
	so := testSO(t, t.TempDir(), "series")
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"library": so, "collector": map[string]any{"series": 2},
	}})
	text := sdktest.CleanGolden(t, res, "testdata/series.golden")
	sdktest.Contains(t, text, `so_collection_errors_total{collector="series"} 0`)
}

func TestExampleLoadavgCollector(t *testing.T) {
	dir := t.TempDir()
	so := buildSO(t, dir, "libplexporter_loadavg.so", []string{"../../sdk/cabi/examples/loadavg.c"})
	loadavg := filepath.Join(dir, "loadavg")
	writeFile(t, loadavg, "0.52 0.58 0.59 3/1247 98765\n")
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"library": so, "collector": map[string]any{"path": loadavg},
	}})
	sdktest.CleanGolden(t, res, "testdata/loadavg.golden")

	// A file it cannot read is a partial error, counted.
	res = sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"library": so, "collector": map[string]any{"path": filepath.Join(dir, "missing")},
	}})
	sdktest.Contains(t, res.Text(t), `so_collection_errors_total{collector="loadavg"} 1`)
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != "loadavg" || !strings.Contains(strings.ToLower(res.Errors[0].GetMessage()), "no such file") {
		t.Errorf("errors = %v, want one from collector loadavg naming the missing file", res.Errors)
	}
}

func TestRefusesLibraries(t *testing.T) {
	dir := t.TempDir()
	series := testSO(t, dir, "series")
	abi2 := buildSO(t, dir, "abi2.so", []string{"testdata/series.c"}, "-DTEST_ABI_VERSION=2")
	notCollector := buildSO(t, dir, "empty.so", []string{"testdata/empty.c"})
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"library": abi2}, Key: "library", Detail: abi2 + " was built against collector ABI 2, and this plexporter-so loads ABI 1 only"},
		{Raw: map[string]any{"library": notCollector}, Key: "library", Detail: notCollector + " does not export plexporter_collector_abi_version"},
		{Raw: map[string]any{"library": filepath.Join(dir, "nope.so")}, Key: "library", Detail: "library: dlopen: " + filepath.Join(dir, "nope.so")},
		{Raw: map[string]any{"library": series, "collector": map[string]any{"fail": 1}}, Key: "collector", Detail: series + ": series: refused as asked"},
	})
}

// The ABI from a second toolchain: a collector written in Go, built with
// -buildmode=c-shared, in a process that has a Go runtime of its own.
func TestGoCSharedCollector(t *testing.T) {
	so := filepath.Join(t.TempDir(), "gocollector.so")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", so, "./testdata/gocollector")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared: %v\n%s", err, b)
	}
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"library": so, "collector": map[string]any{"label": "from-go"},
	}})
	for i := 1; i <= 2; i++ {
		text := sdktest.Collect(t, c, 0).Text(t)
		sdktest.Contains(t, text,
			fmt.Sprintf("gocollector_collects_total %d", i),
			`gocollector_info{label="from-go"} 1`,
			`so_collection_errors_total{collector="gocollector"} 0`)
		if !strings.Contains(text, "gocollector_goroutines ") {
			t.Errorf("no gocollector_goroutines:\n%s", text)
		}
	}
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"library": so, "collector": map[string]any{"label": 1}}, Key: "collector", Detail: "gocollector settings: json: cannot unmarshal number"},
	})
}

// The emitter stages samples in C and relays them in bulk (stage.h): more
// samples than a stage holds all arrive, in order, each with its own label
// values, and the histogram that takes the direct path comes after them.
func TestCollectsAcrossStages(t *testing.T) {
	const n = 3*4096 + 7 // SO_STAGE_SAMPLES
	so := testSO(t, t.TempDir(), "series")
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"library": so, "collector": map[string]any{"series": n},
	}})
	got := 0
	for _, mf := range res.Families(t) {
		switch mf.GetName() {
		case "test_series_value":
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				i := int(m.GetGauge().GetValue())
				if l["series"] != fmt.Sprintf("s%d", i) || l["shard"] != fmt.Sprintf("h%d", i%64) {
					t.Fatalf("sample %d has labels %v", i, l)
				}
				got++
			}
		case "test_latency_seconds":
			if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 4 || h.GetSampleSum() != 2.5 {
				t.Errorf("histogram = %v", h)
			}
		}
	}
	if got != n {
		t.Errorf("%d test_series_value samples, want %d", got, n)
	}
	sdktest.Contains(t, res.Text(t), "test_collects_total 1", `so_collection_errors_total{collector="series"} 0`)
}

// What a collect staged before the plugin gave up on it is sent: hang.c
// emits one sample and never returns. (Its thread sleeps in this test
// process until the process exits; the plugin's exit is a stub.)
func TestGivenUpCollectKeepsStagedSamples(t *testing.T) {
	so := testSO(t, t.TempDir(), "hang")
	p := newPlugin()
	p.exit = func(string) {}
	c := sdktest.Client(t, p, sdktest.Options{Config: map[string]any{"library": so}})
	res := sdktest.Collect(t, c, 2*time.Second)
	if status.Code(res.Status) != codes.Aborted {
		t.Fatalf("collect status %v, want ABORTED (given up on)", res.Status)
	}
	sdktest.Contains(t, res.Text(t), "hang_before_hanging 1", `so_collection_errors_total{collector="hang"} 1`)
}

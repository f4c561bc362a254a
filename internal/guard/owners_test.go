package guard_test

import (
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
)

func declares(descs ...*sdk.Desc) []*pluginv1.MetricDescriptor {
	var out []*pluginv1.MetricDescriptor
	for _, d := range descs {
		t := pluginv1.MetricType_METRIC_TYPE_GAUGE
		switch d.Type {
		case sdk.Counter:
			t = pluginv1.MetricType_METRIC_TYPE_COUNTER
		case sdk.Histogram:
			t = pluginv1.MetricType_METRIC_TYPE_HISTOGRAM
		}
		out = append(out, &pluginv1.MetricDescriptor{Name: d.Name, Type: t, Help: d.Help, LabelNames: d.Labels, Shared: d.Shared})
	}
	return out
}

// A plugin earlier in merge order that sends another plugin's declared
// family, or a series name of it, loses those series, counted against it;
// the owner's series are all exposed, none counted as its duplicates. A
// family declared shared by several plugins is open to them alone.
func TestOwnersKeepDeclaredFamilies(t *testing.T) {
	lat := sdk.NewDesc("v_latency_seconds", sdk.Histogram, "Latency.", "dev")
	latCount := sdk.NewDesc("v_latency_seconds_count", sdk.Gauge, "Forged.", "dev")
	shared := sdk.NewDesc("s_success", sdk.Gauge, "Shared.", "collector").WithShared()
	owners, contested := guard.NewOwners([]guard.Catalogue{
		{Plugin: "victim", Families: declares(up, lat, shared)},
		{Plugin: "other", Families: declares(shared)},
		{Plugin: "aaa", Families: declares(upAlt)}, // first by name: aaa owns x_up, victim is contested
	})
	if len(contested) != 1 || contested[0] != (guard.Contested{Family: "x_up", Owner: "aaa", Other: "victim"}) {
		t.Fatalf("contested = %+v", contested)
	}
	// Without aaa's contested claim, victim owns x_up.
	owners, _ = guard.NewOwners([]guard.Catalogue{
		{Plugin: "victim", Families: declares(up, lat, shared)},
		{Plugin: "other", Families: declares(shared)},
	})
	forger := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(up, 9, "d0")
		w.Gauge(up, 9, "d1")
		w.Gauge(latCount, 1, "d0")
		w.Gauge(shared, 1, "forged")
	})
	victim := batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(up, 1, "d0")
		w.Gauge(up, 1, "d1")
		w.Histogram(lat, []float64{1}, []uint64{1}, 1, 0.5, "d0")
		w.Gauge(shared, 1, "victim")
	})
	other := batchtest.Record(func(w *sdk.Writer) { w.Gauge(shared, 1, "other") })
	r := guard.Merge([]guard.Input{{Plugin: "aaa", Batches: forger}, {Plugin: "other", Batches: other}, {Plugin: "victim", Batches: victim}}, guard.Options{Owners: owners})
	if got := strings.Join(series(r, "x_up"), " "); got != "d0 d1" {
		t.Errorf("x_up = %q", got)
	}
	if got := strings.Join(series(r, "v_latency_seconds"), " "); got != "d0" {
		t.Errorf("the victim's histogram = %q", got)
	}
	if got := strings.Join(series(r, "s_success"), " "); got != "other victim" {
		t.Errorf("shared family = %q", got)
	}
	if d := r.Drops[guard.DropKey{Plugin: "aaa", Reason: guard.ReasonForeignFamily}]; d != 4 {
		t.Errorf("foreign drops of the forger = %d, want 4 (%v)", d, r.Drops)
	}
	for k := range r.Drops {
		if k.Plugin != "aaa" {
			t.Errorf("drops counted against %s: %v", k.Plugin, r.Drops)
		}
	}
	if r.Series["victim"] != 2+4+1 { // a one-bucket histogram is 4 series
		t.Errorf("victim's series = %d", r.Series["victim"])
	}
	if !strings.Contains(r.Causes[guard.DropKey{Plugin: "aaa", Reason: guard.ReasonForeignFamily}], "belongs to plugin victim") {
		t.Errorf("cause = %q", r.Causes[guard.DropKey{Plugin: "aaa", Reason: guard.ReasonForeignFamily}])
	}
}

package workload

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/plexporter/plexporter/internal/wire"
	"github.com/plexporter/plexporter/sdk/metricfilter"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestCounts(t *testing.T) {
	for _, n := range []int{1000, 10000, 100000} {
		if got := Series(n); got != n {
			t.Errorf("Series(%d) = %d", n, got)
		}
	}
}

// text renders families sorted by name with their metrics sorted, so that two
// sources of the same series compare equal whatever their order.
func text(t *testing.T, mfs []*dto.MetricFamily) string {
	t.Helper()
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		if prev := byName[mf.GetName()]; prev != nil {
			prev.Metric = append(prev.Metric, mf.Metric...)
			continue
		}
		byName[mf.GetName()] = mf
	}
	var names []string
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		mf := byName[n]
		var lines []string
		for _, m := range mf.Metric {
			var s strings.Builder
			one := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Metric: []*dto.Metric{m}}
			if _, err := expfmt.MetricFamilyToText(&s, one); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, s.String())
		}
		sort.Strings(lines)
		b.WriteString(strings.Join(lines, ""))
	}
	return b.String()
}

func planFamilies(t *testing.T, filter *metricfilter.Filter, n, shards int) []*dto.MetricFamily {
	t.Helper()
	var rec wire.Recorder
	for shard := range shards {
		w := sdktest.NewWriter(filter, "", rec.Send)
		NewPlan(n, shard, shards).Write(w)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := wire.Families(rec.Batches)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// The plugin side (all shards together) and the client_golang registry expose
// the same series with the same values.
func TestPlanMatchesRegistry(t *testing.T) {
	const n = 1000
	reg := prometheus.NewRegistry()
	if err := Register(reg, n); err != nil {
		t.Fatal(err)
	}
	want, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	wantText := text(t, want)
	if got := strings.Count(wantText, "\nbench_"); got != n {
		t.Fatalf("registry has %d series, want %d", got, n)
	}
	for _, shards := range []int{1, 6} {
		if got := text(t, planFamilies(t, nil, n, shards)); got != wantText {
			t.Errorf("shards=%d: plan differs from registry\nplan:\n%.600s\nregistry:\n%.600s", shards, got, wantText)
		}
	}
}

func TestAllowlistSelectsTenPercent(t *testing.T) {
	filter, err := metricfilter.New(Allowlist(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mfs := planFamilies(t, filter, 10000, 1)
	if len(mfs) != 3 {
		t.Fatalf("%d families enabled, want 3", len(mfs))
	}
	series := 0
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if h := m.GetHistogram(); h != nil {
				series += len(h.Bucket) + 2 // wire.Families includes the +Inf bucket
			} else {
				series++
			}
		}
	}
	if series != 1000 {
		t.Fatalf("%d series enabled, want 1000", series)
	}
}

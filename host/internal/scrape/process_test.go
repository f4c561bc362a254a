package scrape

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// notProcessFamilies are client_golang's process families the host leaves
// out: the network namespace's traffic, not the process's (process.go).
var notProcessFamilies = []string{"process_network_receive_bytes_total", "process_network_transmit_bytes_total"}

// The host's process collector exports what client_golang's does but the
// network namespace's traffic: the same families with the same help and
// type, and the same values where they cannot move between two reads
// (limits, start time).
func TestProcessCollectorMatchesClientGolang(t *testing.T) {
	ours := gather(t, newProcessCollector())
	theirs := gather(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if len(theirs) == 0 {
		t.Skip("client_golang's process collector exports nothing here")
	}
	for _, name := range notProcessFamilies {
		if ours[name] != nil {
			t.Errorf("%s is exported; it is the network namespace's traffic, not the process's", name)
		}
		delete(theirs, name)
	}
	if len(ours) != len(theirs) {
		t.Errorf("%d families, client_golang %d", len(ours), len(theirs))
	}
	for name, want := range theirs {
		got := ours[name]
		if got == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if got.GetHelp() != want.GetHelp() || got.GetType() != want.GetType() || len(got.GetMetric()) != 1 {
			t.Errorf("%s: help %q type %v (%d series), client_golang %q %v", name, got.GetHelp(), got.GetType(), len(got.GetMetric()), want.GetHelp(), want.GetType())
			continue
		}
		value := func(mf *dto.MetricFamily) float64 {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
		switch name {
		case "process_max_fds", "process_virtual_memory_max_bytes", "process_start_time_seconds":
			if value(got) != value(want) {
				t.Errorf("%s = %v, client_golang %v", name, value(got), value(want))
			}
		}
	}
}

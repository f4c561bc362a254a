package guard_test

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
)

// BenchmarkMergeWorkload merges the performance harness's 100k-series
// workload (docs/performance.md) from one plugin, and shared by six plugins
// that each send a slice of every family (the host joins the families).
// cpu-ms/op is the process's CPU time per merge (the GC's included),
// steadier than ns/op on a shared machine.
//
//	go test ./internal/guard -run '^$' -bench MergeWorkload -count 6 | benchstat -
func BenchmarkMergeWorkload(b *testing.B) {
	for _, plugins := range []int{1, 6} {
		b.Run("series=100000/plugins="+strconv.Itoa(plugins), func(b *testing.B) {
			inputs := make([]guard.Input, plugins)
			for i := range plugins {
				plan := workload.NewPlan(100000, i, plugins)
				inputs[i] = guard.Input{Plugin: "bench" + strconv.Itoa(i+1), Batches: batchtest.Record(plan.Write), MaxSeries: 1 << 30}
			}
			b.ReportAllocs()
			var res *guard.Result
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for b.Loop() {
				res = guard.Merge(inputs, guard.Options{MaxLabelValueLen: 4096})
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
			total := 0
			for _, n := range res.Series {
				total += n
			}
			if total != workload.Series(100000) {
				b.Fatalf("merged %d series, want %d", total, workload.Series(100000))
			}
		})
	}
}

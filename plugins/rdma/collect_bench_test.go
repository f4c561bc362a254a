package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// BenchmarkCollectSysfs is one whole sysfs Collect (read every port, write
// the samples into batches; no netlink, no gRPC) on the fixture tree, or on
// the tree PERFHARNESS_SYSFS names: the performance harness points it at its
// 16-device x 2-port tree (docs/performance.md, scenario 2) and profiles it.
//
//	go test ./plugins/rdma -run '^$' -bench CollectSysfs -cpuprofile rdma.pprof
func BenchmarkCollectSysfs(b *testing.B) {
	root := os.Getenv("PERFHARNESS_SYSFS")
	if root == "" {
		root = filepath.Join(sdktest.Unpack(b, "testdata/sysfs.ttar"), "sys")
	}
	p := newPlugin()
	if err := p.Configure(context.Background(), sdktest.Config(b, map[string]any{"optional_counters": false}, sdk.Paths{Sysfs: root})); err != nil {
		b.Fatal(err)
	}
	samples := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		samples = 0
		w := sdktest.NewWriter(nil, "", func(r *pluginv1.CollectResponse) error {
			for _, f := range r.GetBatch().GetFamilies() {
				samples += len(f.Values)
			}
			return nil
		})
		if err := p.Collect(context.Background(), w); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	// Devices are read in parallel: wall time (ns/op) is not CPU time.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(samples), "samples/op")
}

// cpuTime is the process's user + system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package main

import (
	"os"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestRealKernel scrapes this machine's /proc and /sys (this kernel has
// PSI): every procfs family is there, without a partial error, and the
// exposition passes promtool.
func TestRealKernel(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		t.Skipf("this kernel has no PSI: %v", err)
	}
	p := newPlugin()
	res := sdktest.Run(t, p, sdktest.Options{Procfs: "/proc", Sysfs: "/sys", Rootfs: "/", Config: map[string]any{"kmsg": false}})
	t.Cleanup(func() { p.Close() })
	if res.Status != nil {
		t.Fatalf("collect failed: %v", res.Status)
	}
	for _, e := range res.Errors {
		t.Errorf("partial error: %s: %s", e.GetCollector(), e.GetMessage())
	}
	text := res.Text(t)
	sdktest.Contains(t, text,
		"cpu_steal_seconds_total ", "cpus_online ", "procs_running ", "procs_blocked ",
		`psi_cpu_ratio{scope="some",window="10"} `, `psi_io_stall_seconds_total{scope="full"} `,
		`psi_memory_ratio{scope="full",window="300"} `,
		"mem_available_bytes ", "swap_used_bytes ",
		`disk_used_bytes{device=`, `guest_collection_errors_total{collector="stat"} 0`)
	sdktest.PromtoolClean(t, text, nil) // no seed name draws a finding
	t.Logf("exposition:\n%s", text)
}

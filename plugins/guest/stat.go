package main

import (
	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
)

// writeStat writes steal, the online vCPUs and the run queue from
// <procfs>/stat. procfs converts the jiffies with USER_HZ (100), which the
// kernel fixes for userspace whatever its own CONFIG_HZ.
func writeStat(w *sdk.Writer, fs procfs.FS, fail failFunc) {
	st, err := fs.Stat()
	if err != nil {
		fail(collectorStat, err)
		return
	}
	w.Counter(descCPUSteal, st.CPUTotal.Steal)
	// /proc/stat lists online CPUs only: an offlined vCPU has no cpuN line.
	w.Gauge(descCPUCount, float64(len(st.CPU)))
	w.Gauge(descProcsRunning, float64(st.ProcessesRunning))
	w.Gauge(descProcsBlocked, float64(st.ProcessesBlocked))
}

package main

import (
	"errors"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
)

// writeMeminfo writes the available memory and the swap in use from
// <procfs>/meminfo. A field the kernel did not print gets no sample
// (MemAvailable exists from 3.14 on) and is counted.
func writeMeminfo(w *sdk.Writer, pfs procfs.FS, fail failFunc) {
	mi, err := pfs.Meminfo()
	if err != nil {
		fail(collectorMeminfo, err)
		return
	}
	if mi.MemAvailableBytes != nil {
		w.Gauge(descMemAvailable, float64(*mi.MemAvailableBytes))
	} else {
		fail(collectorMeminfo, errors.New("meminfo: no MemAvailable line"))
	}
	if mi.SwapTotalBytes != nil && mi.SwapFreeBytes != nil {
		w.Gauge(descSwapUsed, float64(*mi.SwapTotalBytes)-float64(*mi.SwapFreeBytes))
	} else {
		fail(collectorMeminfo, errors.New("meminfo: no SwapTotal or SwapFree line"))
	}
}

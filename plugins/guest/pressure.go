package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
)

// psiWindows are the averaging windows of a PSI line, in seconds: the
// window label.
var psiWindows = [3]string{"10", "60", "300"}

// writePressure writes <procfs>/pressure/{cpu,io,memory}. A kernel without
// PSI (CONFIG_PSI off, or psi=0 on the command line) has no pressure
// directory: no series and no error. A line procfs cannot parse fails that
// resource's file, which is counted; a line of an unknown kind ("some" and
// "full" are the kinds today) is skipped by procfs so that a future kernel
// does not break the known ones.
func writePressure(w *sdk.Writer, pfs procfs.FS, procRoot string, fail failFunc) {
	for _, r := range psiResources {
		if !w.Enabled(r.ratio) && !w.Enabled(r.stall) {
			continue
		}
		st, err := pfs.PSIStatsForResource(r.name)
		if err != nil {
			if psiUnavailable(err) {
				continue
			}
			fail(r.collector, fmt.Errorf("%s: %w", filepath.Join(procRoot, "pressure", r.name), err))
			continue
		}
		writePSILine(w, r.ratio, r.stall, "some", st.Some)
		writePSILine(w, r.ratio, r.stall, "full", st.Full)
	}
}

// psiUnavailable tells a kernel without PSI from a failed read. Reading
// pressure/cpu with PSI compiled in but disabled at run time is
// EOPNOTSUPP on some kernels.
func psiUnavailable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP)
}

func writePSILine(w *sdk.Writer, ratio, stall *sdk.Desc, scope string, l *procfs.PSILine) {
	if l == nil {
		return // the kernel printed no such line (cpu "full" before 5.13)
	}
	for i, avg := range [3]float64{l.Avg10, l.Avg60, l.Avg300} {
		w.Gauge(ratio, avg/100, scope, psiWindows[i])
	}
	w.Counter(stall, float64(l.Total)/1e6, scope) // microseconds
}

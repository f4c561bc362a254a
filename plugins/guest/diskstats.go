package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/prometheus/procfs/blockdevice"

	"github.com/plexporter/plexporter/sdk"
)

// Field counts of a diskstats line (major, minor and name included): the
// kernel prints 14 before 4.18, 18 with the discard fields, 20 with the
// flush fields from 5.5 on. procfs parses whatever a line has and drops a
// line with fewer than 14.
const (
	diskstatsDiscardFields = 18
	diskstatsFlushFields   = 20
)

const sectorBytes = 512 // diskstats counts 512-byte sectors whatever the device's sector size

// writeDiskstats writes the whole disks of <procfs>/diskstats whose names
// match re.
//
// A whole disk is an entry of <sysfs>/block: the kernel lists every disk
// there and no partition (partitions are subdirectories of their disk).
// A name rule cannot tell them apart in general: nvme0n1 is a disk and
// nvme0n1p1 its partition, but mmcblk0 and md0 are disks whose names end
// in digits like a partition's, and dm-0 or loop0 can have partitions too.
func writeDiskstats(w *sdk.Writer, src sources, re *regexp.Regexp, fail failFunc) {
	stats, err := src.block.ProcDiskstats()
	if err != nil {
		// procfs stops at the first line it cannot parse and returns the
		// lines before it: export those, count the failure.
		fail(collectorDiskstats, fmt.Errorf("%s: %w", filepath.Join(src.procRoot, "diskstats"), err))
		if len(stats) == 0 {
			return
		}
	}
	disks, err := src.block.SysBlockDevices()
	if err != nil {
		fail(collectorDiskstats, fmt.Errorf("list whole disks: %w", err))
		return
	}
	wanted := make(map[string]bool, len(disks))
	for _, d := range disks {
		if re.MatchString(d) {
			wanted[d] = true
		}
	}
	for i := range stats {
		d := &stats[i]
		if !wanted[d.DeviceName] {
			continue
		}
		delete(wanted, d.DeviceName)
		writeDisk(w, d)
	}
	// A disk whose line procfs dropped (fewer than 14 fields) is counted,
	// not silently missing.
	missing := make([]string, 0, len(wanted))
	for d := range wanted {
		missing = append(missing, d)
	}
	slices.Sort(missing)
	for _, d := range missing {
		fail(collectorDiskstats, fmt.Errorf("%s: no line of 14 or more fields for disk %s", filepath.Join(src.procRoot, "diskstats"), d))
	}
}

func writeDisk(w *sdk.Writer, d *blockdevice.Diskstats) {
	dev := d.DeviceName
	w.Counter(descDiskReads, float64(d.ReadIOs), dev)
	w.Counter(descDiskWrites, float64(d.WriteIOs), dev)
	w.Counter(descDiskReadTime, float64(d.ReadTicks)/1000, dev)
	w.Counter(descDiskWriteTime, float64(d.WriteTicks)/1000, dev)
	w.Counter(descDiskReadBytes, float64(d.ReadSectors)*sectorBytes, dev)
	w.Counter(descDiskWrittenBytes, float64(d.WriteSectors)*sectorBytes, dev)
	w.Counter(descDiskIOTime, float64(d.IOsTotalTicks)/1000, dev)
	w.Gauge(descDiskIOsInProgress, float64(d.IOsInProgress), dev)
	if d.IoStatsCount >= diskstatsDiscardFields {
		w.Counter(descDiskDiscards, float64(d.DiscardIOs), dev)
	}
	if d.IoStatsCount >= diskstatsFlushFields {
		w.Counter(descDiskFlushes, float64(d.FlushRequestsCompleted), dev)
	}
}

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs/blockdevice"

	"github.com/plexporter/plexporter/sdk"
)

// Field counts of a diskstats line (major, minor and name included): the
// kernel prints 14 before 4.18, 18 with the discard fields, 20 with the
// flush fields from 5.5 on. Numbers a later kernel appends are ignored.
const (
	diskstatsMinFields     = 14
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
	path := filepath.Join(src.procRoot, "diskstats")
	f, err := os.Open(path)
	if err != nil {
		fail(collectorDiskstats, err)
		return
	}
	stats, bad, err := parseDiskstats(f, path)
	f.Close()
	if err != nil {
		fail(collectorDiskstats, err)
		return
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
	for _, b := range bad {
		fail(collectorDiskstats, b)
		delete(wanted, b.device) // reported: that line is the disk's error
	}
	for i := range stats {
		d := &stats[i]
		if !wanted[d.DeviceName] {
			continue
		}
		delete(wanted, d.DeviceName)
		writeDisk(w, d)
	}
	// A whole disk the file has no line for is counted, not silently
	// missing.
	missing := make([]string, 0, len(wanted))
	for d := range wanted {
		missing = append(missing, d)
	}
	slices.Sort(missing)
	for _, d := range missing {
		fail(collectorDiskstats, fmt.Errorf("%s: no line for disk %s", path, d))
	}
}

// badDiskstatsLine is a line of diskstats that could not be read; device
// is its third field, when it has one.
type badDiskstatsLine struct {
	device string
	err    error
}

func (b badDiskstatsLine) Error() string { return b.err.Error() }

// parseDiskstats reads diskstats line by line into procfs' type. procfs'
// own reader (blockdevice.FS.ProcDiskstats) stops at the first line it
// cannot scan, so one bad line would drop every disk listed after it, and
// it exports no parser of one line; this one keeps every line it can read
// and returns each it cannot (fewer than 14 fields, a field that is not a
// number), naming the file and the line. err is a read error of the file.
func parseDiskstats(r io.Reader, path string) (stats []blockdevice.Diskstats, bad []badDiskstatsLine, err error) {
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		ss := strings.Fields(s.Text())
		if len(ss) == 0 {
			continue
		}
		d, err := parseDiskstatsLine(ss)
		if err != nil {
			b := badDiskstatsLine{err: fmt.Errorf("%s line %d: %w: %q", path, n, err, s.Text())}
			if len(ss) >= 3 {
				b.device = ss[2]
			}
			bad = append(bad, b)
			continue
		}
		stats = append(stats, d)
	}
	if err := s.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return stats, bad, nil
}

func parseDiskstatsLine(ss []string) (blockdevice.Diskstats, error) {
	var d blockdevice.Diskstats
	if len(ss) < diskstatsMinFields {
		return d, fmt.Errorf("%d fields, the kernel prints at least %d", len(ss), diskstatsMinFields)
	}
	n := min(len(ss), diskstatsFlushFields)
	for i, p := range []*uint32{&d.MajorNumber, &d.MinorNumber} {
		v, err := strconv.ParseUint(ss[i], 10, 32)
		if err != nil {
			return d, fmt.Errorf("field %d: %w", i+1, err)
		}
		*p = uint32(v)
	}
	d.DeviceName = ss[2]
	st := &d.IOStats
	for i, p := range []*uint64{
		&st.ReadIOs, &st.ReadMerges, &st.ReadSectors, &st.ReadTicks,
		&st.WriteIOs, &st.WriteMerges, &st.WriteSectors, &st.WriteTicks,
		&st.IOsInProgress, &st.IOsTotalTicks, &st.WeightedIOTicks,
		&st.DiscardIOs, &st.DiscardMerges, &st.DiscardSectors, &st.DiscardTicks,
		&st.FlushRequestsCompleted, &st.TimeSpentFlushing,
	}[:n-3] {
		v, err := strconv.ParseUint(ss[3+i], 10, 64)
		if err != nil {
			return d, fmt.Errorf("field %d: %w", 4+i, err)
		}
		*p = v
	}
	d.IoStatsCount = n
	return d, nil
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

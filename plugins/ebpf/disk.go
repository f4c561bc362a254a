package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
)

// The disk programs' variants, in the order auto tries them.
var diskVariants = map[string]variant{
	attachTPBTF: {attach: attachTPBTF, hooks: []hook{
		{program: "tpbtf_block_rq_issue", event: "block_rq_issue", group: "block"},
		{program: "tpbtf_block_rq_complete", event: "block_rq_complete", group: "block"},
	}},
	attachTracepoint: {attach: attachTracepoint, hooks: []hook{
		{program: "tp_block_rq_issue", event: "block_rq_issue", group: "block"},
		{program: "tp_block_rq_complete", event: "block_rq_complete", group: "block"},
	}},
}

// Directions, the op field of disk_key (enum disk_op in disk.bpf.c).
const (
	opRead  = 0
	opWrite = 1
)

// Indexes of disk_errors (enum disk_error).
const (
	diskErrStatsFull   = 0
	diskErrStartUpdate = 1
)

// diskSpec returns the disk object's spec with the histogram bounds set.
func diskSpec(bounds []float64) (*ebpf.CollectionSpec, error) {
	spec, err := loadDisk()
	if err != nil {
		return nil, err
	}
	ns := boundsNanoseconds(bounds)
	if err := spec.Variables["bounds_ns"].Set(ns); err != nil {
		return nil, fmt.Errorf("set bounds_ns: %w", err)
	}
	if err := spec.Variables["nr_bounds"].Set(uint32(len(bounds))); err != nil {
		return nil, fmt.Errorf("set nr_bounds: %w", err)
	}
	return spec, nil
}

// diskTotals are one device and direction's counters, summed over CPUs.
type diskTotals struct {
	ios, bytes, latencyNs uint64
	buckets               [maxBounds + 1]uint64 // non-cumulative; the last is above every bound
}

// readDiskStats sums the per-CPU disk_stats map.
func readDiskStats(m *ebpf.Map) (map[diskDiskKey]diskTotals, error) {
	out := map[diskDiskKey]diskTotals{}
	var (
		key    diskDiskKey
		perCPU []diskDiskStats
	)
	it := m.Iterate()
	for it.Next(&key, &perCPU) {
		var t diskTotals
		for _, s := range perCPU {
			t.ios += s.Ios
			t.bytes += s.Bytes
			t.latencyNs += s.LatencyNs
			for i, b := range s.Buckets {
				t.buckets[i] += b
			}
		}
		out[key] = t
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read disk_stats: %w", err)
	}
	return out, nil
}

// readPerCPUCounter sums one entry of a per-CPU array of counters.
func readPerCPUCounter(m *ebpf.Map, index uint32) (uint64, error) {
	var perCPU []uint64
	if err := m.Lookup(index, &perCPU); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// deviceNamer names block devices by the kernel's dev_t (major<<20 |
// minor), as sysfs does: <sysfs>/dev/block/MAJ:MIN links to the device's
// directory, whose name is the kernel's name for the disk (vda, nvme0n1).
type deviceNamer struct {
	sysfs string
	mu    sync.Mutex
	names map[uint32]string
}

func newDeviceNamer(sysfs string) *deviceNamer {
	return &deviceNamer{sysfs: sysfs, names: map[uint32]string{}}
}

// name returns the device's name, or its MAJ:MIN when sysfs does not know
// it (any more): a device that went away still has its counters.
func (n *deviceNamer) name(dev uint32) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.names[dev]; ok {
		return s, nil
	}
	majMin := fmt.Sprintf("%d:%d", dev>>20, dev&(1<<20-1))
	target, err := os.Readlink(filepath.Join(n.sysfs, "dev", "block", majMin))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return majMin, nil // not cached: the device may appear
		}
		return majMin, err
	}
	name := filepath.Base(target)
	n.names[dev] = name
	return name, nil
}

package main

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/plexporter/plexporter/sdk"
)

// The smoothed-RTT programs' variants (rtt.bpf.c). tcp_probe fires for
// every segment every established TCP socket of the node receives, so the
// group is opt-in (tcp_rtt: true); the filter keeps all but the watched
// destinations at two hash lookups.
var rttVariants = map[string]variant{
	attachTPBTF: {attach: attachTPBTF, hooks: []hook{
		{program: "tpbtf_tcp_probe", event: "tcp_probe", group: "tcp"},
	}},
	attachTracepoint: {attach: attachTracepoint, hooks: []hook{
		{program: "tp_tcp_probe", event: "tcp_probe", group: "tcp"},
	}},
}

var (
	descNFSRTT         = sdk.NewDesc("nfs_tcp_rtt_seconds", sdk.Histogram, "The kernel's smoothed TCP round-trip time to an NFS server (on the NFS ports), sampled at every segment received from it.", lServer).WithUnit("seconds")
	descObjectStoreRTT = sdk.NewDesc("object_store_tcp_rtt_seconds", sdk.Histogram, "The kernel's smoothed TCP round-trip time to an object-store endpoint's addresses (on the object-store ports), sampled at every segment received.", lEndpoint).WithUnit("seconds")
)

const (
	collectorRTT    = "tcp_rtt"
	reasonRTTFull   = "rtt_stats_full"
	rttStatsFullIdx = 0 // index of rtt_counters (enum rtt_counter)
	minRTTExp       = -17
	maxRTTExp       = 0
)

// defaultRTTBounds: native histogram schema 0 from 2^-17 s (7.6 µs, a
// loopback or same-rack RTT) to 2^0 s.
func defaultRTTBounds() []float64 {
	out := make([]float64, 0, maxRTTExp-minRTTExp+1)
	for i := minRTTExp; i <= maxRTTExp; i++ {
		out = append(out, schema0Bound(i))
	}
	return out
}

func rttSpec(bounds []float64, maxDestinations int) (*ebpf.CollectionSpec, error) {
	spec, err := loadRtt()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["bounds_ns"].Set(boundsNanoseconds(bounds)); err != nil {
		return nil, fmt.Errorf("set bounds_ns: %w", err)
	}
	if err := spec.Variables["nr_bounds"].Set(uint32(len(bounds))); err != nil {
		return nil, fmt.Errorf("set nr_bounds: %w", err)
	}
	spec.Maps["rtt_stats"].MaxEntries = uint32(maxDestinations)
	return spec, nil
}

// rttCounts: samples, srtt_ns, then the non-cumulative buckets.
type rttCounts [2 + maxBounds + 1]uint64

const (
	rcSamples = iota
	rcSrttNs
	rcBuckets
)

func readRTTStats(m *ebpf.Map) (map[destination]rttCounts, error) {
	out := map[destination]rttCounts{}
	var (
		key    rttRttKey
		perCPU []rttRttStats
	)
	it := m.Iterate()
	for it.Next(&key, &perCPU) {
		var c rttCounts
		for _, s := range perCPU {
			c[rcSamples] += s.Samples
			c[rcSrttNs] += s.SrttNs
			for i, b := range s.Buckets {
				c[rcBuckets+i] += b
			}
		}
		out[destination{addr: netip.AddrFrom16(key.Addr.B).Unmap(), port: key.Port, class: key.Class}] = c
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read rtt_stats: %w", err)
	}
	return out, nil
}

// rttTotals adds each destination's growth to the series labelsOf names
// now (an endpoint's addresses change with resolution), so that no
// series goes down.
type rttTotals struct {
	last   map[destination]rttCounts
	totals map[seriesKey]*rttCounts
}

func newRTTTotals() *rttTotals {
	return &rttTotals{last: map[destination]rttCounts{}, totals: map[seriesKey]*rttCounts{}}
}

func (r *rttTotals) update(now map[destination]rttCounts, labelsOf func(destination) []string) {
	for d, n := range now {
		prev, seen := r.last[d]
		if !seen || n[rcSamples] < prev[rcSamples] {
			prev = rttCounts{}
		}
		if n[rcSamples] == prev[rcSamples] {
			continue
		}
		for _, name := range labelsOf(d) {
			k := seriesKey{d.class, name}
			sum := r.totals[k]
			if sum == nil {
				sum = &rttCounts{}
				r.totals[k] = sum
			}
			for i := range n {
				sum[i] += n[i] - prev[i]
			}
		}
	}
	r.last = now
}

// writeRTT writes the RTT histograms. Called with p.mu held.
func (p *plugin) writeRTT(w *sdk.Writer) error {
	if p.rtt == nil {
		return nil
	}
	counts, err := readRTTStats(p.rtt.coll.Maps["rtt_stats"])
	if err != nil {
		return err
	}
	p.rttTotals.update(counts, p.labelsOf)
	bounds := p.cfg.rttBounds
	for k, t := range p.rttTotals.totals {
		cumulative := make([]uint64, len(bounds))
		var n uint64
		for i := range cumulative {
			n += t[rcBuckets+i]
			cumulative[i] = n
		}
		count := n + t[rcBuckets+len(bounds)]
		desc := descNFSRTT
		if k.class == classObjectStore {
			desc = descObjectStoreRTT
		}
		writeLatency(w, p.cfg.nativeHistograms(), desc, bounds, cumulative, count, float64(t[rcSrttNs])/1e9, k.name)
	}
	full, err := readPerCPUCounter(p.rtt.coll.Maps["rtt_counters"], rttStatsFullIdx)
	if err != nil {
		return fmt.Errorf("read rtt_counters: %w", err)
	}
	w.Counter(descEventsDropped, float64(full), reasonRTTFull)
	return nil
}

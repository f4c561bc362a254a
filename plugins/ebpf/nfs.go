package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// The NFS latency programs' variants (nfs.bpf.c). Both run on
// sunrpc:rpc_stats_latency, which exists only while the kernel has an NFS
// client (the sunrpc module, loaded on the first NFS mount on most
// distributions).
var nfsVariants = map[string]variant{
	attachTPBTF: {attach: attachTPBTF, hooks: []hook{
		{program: "tpbtf_rpc_stats_latency", event: "rpc_stats_latency", group: "sunrpc"},
	}},
	attachRawTP: {attach: attachRawTP, hooks: []hook{
		{program: "raw_rpc_stats_latency", event: "rpc_stats_latency"},
	}},
	attachTracepoint: {attach: attachTracepoint, hooks: []hook{
		{program: "tp_rpc_stats_latency", event: "rpc_stats_latency", group: "sunrpc"},
	}},
}

// sunrpcTypes are the sunrpc module's types for the programs' CO-RE
// relocations (cilium/ebpf relocates against vmlinux only unless told),
// read from /sys/kernel/btf/sunrpc on top of the kernel's own; none
// when sunrpc is built in (its types are vmlinux's) or not loaded.
func sunrpcTypes(kernel *btf.Cache) ebpf.ProgramOptions {
	spec, err := kernel.Module("sunrpc")
	if err != nil {
		return ebpf.ProgramOptions{}
	}
	return ebpf.ProgramOptions{ExtraRelocationTargets: []*btf.Spec{spec}}
}

// Index of nfs_counters (enum nfs_counter).
const nfsStatsFull = 0

// The default NFS latency buckets, the 0.5 ms to 50 ms geometric
// range as native histogram schema 0 buckets: 2^-11 s (0.49 ms) to 2^-4 s
// (62.5 ms).
const (
	minNFSExp = -11
	maxNFSExp = -4
)

func defaultNFSBounds() []float64 {
	out := make([]float64, 0, maxNFSExp-minNFSExp+1)
	for i := minNFSExp; i <= maxNFSExp; i++ {
		out = append(out, schema0Bound(i))
	}
	return out
}

// nfsSpec returns the NFS object's spec with the bounds set.
func nfsSpec(bounds []float64) (*ebpf.CollectionSpec, error) {
	spec, err := loadNfs()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["bounds_ns"].Set(boundsNanoseconds(bounds)); err != nil {
		return nil, fmt.Errorf("set bounds_ns: %w", err)
	}
	if err := spec.Variables["nr_bounds"].Set(uint32(len(bounds))); err != nil {
		return nil, fmt.Errorf("set nr_bounds: %w", err)
	}
	return spec, nil
}

// nfsCall is one key of nfs_stats, decoded: the RPC's server, NFS version
// and procedure.
type nfsCall struct {
	// server is the server's address; serverText is what the classic
	// event recorded when it is not an address (then server is invalid).
	server     netip.Addr
	serverText string
	version    uint32
	operation  string // the procedure's name, lower case (as mountstats in the nfs plugin)
}

// serverLabel is the server label of the call's series.
func (c nfsCall) serverLabel() string {
	if c.server.IsValid() {
		return c.server.String()
	}
	return c.serverText
}

// protocol is the protocol label: the RPC program and version, nfs3 or
// nfs4 (NFSv4.1 and 4.2 are RPC version 4 too).
func (c nfsCall) protocol() string { return "nfs" + strconv.FormatUint(uint64(c.version), 10) }

// nfsCounts is one call's counters: requests, RPC retransmissions,
// latency_ns, then the non-cumulative buckets.
type nfsCounts [3 + maxBounds + 1]uint64

const (
	ncRequests = iota
	ncRetransmits
	ncLatencyNs
	ncBuckets
)

func decodeNFSKey(k nfsNfsKey) nfsCall {
	c := nfsCall{version: k.Vers, operation: strings.ToLower(cString(k.Proc[:]))}
	if k.AddrText == 0 {
		c.server = netip.AddrFrom16([16]byte(k.Addr[:16])).Unmap()
		return c
	}
	text := string(k.Addr[:])
	if i := bytes.IndexByte(k.Addr[:], 0); i >= 0 {
		text = string(k.Addr[:i])
	}
	if a, err := netip.ParseAddr(text); err == nil {
		c.server = a.Unmap()
	} else {
		c.serverText = text
	}
	return c
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// readNFSStats sums the per-CPU nfs_stats map.
func readNFSStats(m *ebpf.Map) (map[nfsCall]nfsCounts, error) {
	out := map[nfsCall]nfsCounts{}
	var (
		key    nfsNfsKey
		perCPU []nfsNfsStats
	)
	it := m.Iterate()
	for it.Next(&key, &perCPU) {
		var c nfsCounts
		for _, s := range perCPU {
			c[ncRequests] += s.Requests
			c[ncRetransmits] += s.Retransmits
			c[ncLatencyNs] += s.LatencyNs
			for i, b := range s.Buckets {
				c[ncBuckets+i] += b
			}
		}
		// Two keys can decode to one call (the same address as text and
		// binary never happens in one mode, but a text that Unmap folds
		// can): add, do not overwrite.
		call := decodeNFSKey(key)
		prev := out[call]
		for i := range c {
			prev[i] += c[i]
		}
		out[call] = prev
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read nfs_stats: %w", err)
	}
	return out, nil
}

// nfsSeries is one series of the NFS latency families.
type nfsSeries struct {
	protocol, operation, volumeID, server string
}

// nfsTotals accumulates each call's growth into the series its server and
// version map to now: a mount or unmount that changes the volume_id of a
// server's calls moves their later counts to the new series, and no
// series goes down.
type nfsTotals struct {
	last   map[nfsCall]nfsCounts
	totals map[nfsSeries]*nfsCounts
}

func newNFSTotals() *nfsTotals {
	return &nfsTotals{last: map[nfsCall]nfsCounts{}, totals: map[nfsSeries]*nfsCounts{}}
}

func (t *nfsTotals) update(now map[nfsCall]nfsCounts, vols nfsVolumes) {
	for call, n := range now {
		prev, seen := t.last[call]
		if !seen || n[ncRequests] < prev[ncRequests] {
			prev = nfsCounts{} // new (the map is never cleared while loaded)
		}
		if n[ncRequests] == prev[ncRequests] {
			continue
		}
		s := nfsSeries{protocol: call.protocol(), operation: call.operation, server: call.serverLabel()}
		if call.server.IsValid() {
			s.volumeID = vols.volumeID(call.server, call.version)
		}
		sum := t.totals[s]
		if sum == nil {
			sum = &nfsCounts{}
			t.totals[s] = sum
		}
		for i := range n {
			sum[i] += n[i] - prev[i]
		}
	}
	t.last = now
}

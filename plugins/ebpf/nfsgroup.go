package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/plexporter/plexporter/sdk"
)

// NFS per-operation latency, requests and RPC retransmissions (nfs.bpf.c).
// The latency total is the histogram's _sum, as for the disks.
var (
	descNFSOpLatency     = sdk.NewDesc("nfs_op_latency_seconds", sdk.Histogram, "NFS RPC latency from the request's start to its reply (the RPC's execute time), per NFS protocol version, operation and volume (volume_id is empty when the server and version have no or several volumes mounted).", lProtocol, lOperation, lVolumeID, lServer).WithUnit("seconds")
	descNFSOpRequests    = sdk.NewDesc("nfs_op_requests_total", sdk.Counter, "NFS RPCs completed, per NFS protocol version, operation and volume.", lProtocol, lOperation, lVolumeID, lServer)
	descNFSOpRetransmits = sdk.NewDesc("nfs_op_rpc_retransmits_total", sdk.Counter, "NFS RPC transmissions beyond each request's first, per NFS protocol version, operation and volume (tp_btf and raw_tp modes: the classic tracepoint does not record them).", lProtocol, lOperation, lVolumeID, lServer)
)

const (
	lProtocol  = "protocol"
	lOperation = "operation"
	lVolumeID  = "volume_id"

	collectorNFSLatency = "nfs_latency"
	reasonNFSStatsFull  = "nfs_stats_full"
)

// nfsLatency is the NFS latency group's state. Unlike the other groups it
// may load after Configure: its event exists only once the kernel's NFS
// client (sunrpc) is loaded, which on most distributions happens at the
// first NFS mount. So in the default mode it is loaded at a refresh that
// finds an NFS mount, and tried again only when the NFS mounts change.
type nfsLatency struct {
	probe   *probe
	states  []programState
	totals  *nfsTotals
	volumes nfsVolumes
	// triedFor is the NFS mount table the last load attempt was made for.
	triedFor string
	tried    bool
	noMounts bool // logged that nothing is mounted
}

func (n *nfsLatency) close() {
	if n.probe != nil {
		n.probe.Close()
		n.probe = nil
	}
}

// refreshNFSLatency reads the NFS mounts, maps servers to volumes and
// loads the programs when they should run and do not yet. Called with
// p.mu held, from refreshLocked.
func (p *plugin) refreshNFSLatency() {
	if p.cfg.nfsLatencyMode() == nfsLatencyOff {
		return
	}
	mounts, err := readNFSMounts(p.mounts)
	p.watch.report(p, collectorNFSLatency, "mounts", err)
	if err != nil {
		return // keep the previous volumes
	}
	p.nfs.volumes = buildNFSVolumes(mounts, p.cfg.volumeNamer)
	if p.nfs.probe != nil {
		return
	}
	forced := p.cfg.nfsLatencyMode() == nfsLatencyOn
	if len(mounts) == 0 && !forced {
		if !p.nfs.noMounts {
			p.nfs.noMounts = true
			p.logf("ebpf programs not loaded", "group", collectorNFSLatency, "reason", "no NFS mount in "+p.mounts+"; loaded once one appears (nfs_latency: true loads them anyway)")
		}
		return
	}
	p.nfs.noMounts = false
	fingerprint := mountsFingerprint(mounts)
	if p.nfs.tried && fingerprint == p.nfs.triedFor {
		return // failed for this mount table already: reported once
	}
	p.nfs.triedFor, p.nfs.tried = fingerprint, true
	defer p.beginLoads()()
	if !forced && !sunrpcLoaded(p.tracefs, p.kernelTypes) {
		// A mount table that is not this kernel's (a container's view of
		// another root) or a client not loaded yet: nothing to count.
		p.logf("ebpf programs not loaded", "group", collectorNFSLatency, "reason", "NFS is mounted in "+p.mounts+" but this kernel has no NFS client (sunrpc) loaded; tried again when the NFS mounts change (nfs_latency: true tries and reports the failure)")
		return
	}
	if p.sealed {
		// This process can no longer load programs: a fresh one loads the
		// group in its Configure, which reads the same mounts.
		p.restart("the nfs_latency programs must load now (an NFS mount appeared or changed, and the kernel has its NFS client), and this process can no longer load programs; the new process loads them at start")
		return
	}
	spec, err := nfsSpec(p.cfg.nfsBounds)
	if err != nil {
		p.failLater(collectorNFSLatency, fmt.Errorf("nfs_latency programs: %w", err))
		return
	}
	running, states, err := loadGroup(collectorNFSLatency, spec, p.cfg.attachVariants(collectorNFSLatency), p.tracefs, p.loadOptions(sunrpcTypes(p.kernelTypes)), p.logf)
	p.nfs.states = states
	if err != nil {
		p.failLater(collectorNFSLatency, fmt.Errorf("%w (the kernel's NFS client, sunrpc, must be loaded: it is once an NFS file system is mounted)", err))
		return
	}
	p.nfs.probe = running
	p.nfs.totals = newNFSTotals()
}

func mountsFingerprint(mounts []nfsMount) string {
	var lines []string
	for _, m := range mounts {
		lines = append(lines, fmt.Sprintf("%s %d %s", m.server, m.version, m.export))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// writeNFS writes the group's program states and, when it runs, its
// series. Called with p.mu held.
func (p *plugin) writeNFS(w *sdk.Writer) error {
	for _, s := range p.nfs.states {
		v := 0.0
		if s.loaded {
			v = 1
		}
		w.Gauge(descProgramLoaded, v, s.event, s.attach)
	}
	if p.nfs.probe == nil {
		return nil
	}
	calls, err := readNFSStats(p.nfs.probe.coll.Maps["nfs_stats"])
	if err != nil {
		return err
	}
	p.nfs.totals.update(calls, p.nfs.volumes)
	bounds := p.cfg.nfsBounds
	for s, t := range p.nfs.totals.totals {
		cumulative := make([]uint64, len(bounds))
		var n uint64
		for i := range cumulative {
			n += t[ncBuckets+i]
			cumulative[i] = n
		}
		count := n + t[ncBuckets+len(bounds)]
		labels := []string{s.protocol, s.operation, s.volumeID, s.server}
		writeLatency(w, p.cfg.nativeHistograms(), descNFSOpLatency, bounds, cumulative, count, float64(t[ncLatencyNs])/1e9, labels...)
		w.Counter(descNFSOpRequests, float64(t[ncRequests]), labels...)
		if p.nfs.probe.attach != attachTracepoint {
			w.Counter(descNFSOpRetransmits, float64(t[ncRetransmits]), labels...)
		}
	}
	full, err := readPerCPUCounter(p.nfs.probe.coll.Maps["nfs_counters"], nfsStatsFull)
	if err != nil {
		return fmt.Errorf("read nfs_counters: %w", err)
	}
	w.Counter(descEventsDropped, float64(full), reasonNFSStatsFull)
	return nil
}

// sunrpcLoaded tells whether the kernel has the NFS client's RPC layer,
// whose event the programs attach to: the sunrpc module's BTF, the event's
// type in the kernel's own BTF (sunrpc built in), or its tracefs directory.
// Without it neither mode can load, and on a node that mounts NFS it is
// loaded by the first mount, which changes the mount table. kernel holds
// the kernel's types, decoded once for this check and the load after it.
func sunrpcLoaded(tracefs string, kernel *btf.Cache) bool {
	if _, err := os.Stat("/sys/kernel/btf/sunrpc"); err == nil {
		return true
	}
	if spec, err := kernel.Kernel(); err == nil {
		if _, err := spec.AnyTypeByName("btf_trace_rpc_stats_latency"); err == nil {
			return true
		}
	}
	_, err := os.Stat(filepath.Join(tracefs, "events", "sunrpc", "rpc_stats_latency"))
	return err == nil
}

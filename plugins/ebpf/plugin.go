package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/plexporter/plexporter/sdk"
)

// plugin exports what its BPF programs count: block request latency per
// disk and TCP retransmissions per watched destination.
type plugin struct {
	logf func(msg string, args ...any)

	mu        sync.Mutex
	cfg       config
	tracefs   string
	mounts    string
	disk      *probe // nil when no disk variant runs
	tcp       *probe // nil when no TCP variant runs
	conn      *probe // nil when no connection variant runs
	conns     *connTotals
	rtt       *probe // nil unless tcp_rtt is on and a variant runs
	rttTotals *rttTotals
	nfs       nfsLatency
	programs  []programState
	// kernelTypes is the kernel's BTF shared by the loads in progress
	// (beginLoads), nil between them.
	kernelTypes *btf.Cache
	devices     *deviceNamer
	retrans     *retransmitTotals
	watch       watchState
	errs        sdk.CollectionErrors // ebpf_collection_errors_total
	pending     []pendingError       // failures since the last Collect
	stop        chan struct{}
	done        chan struct{}

	// seal, when set (the shipped binary: shipped()), is called once
	// Configure has loaded and attached the programs and takes the ability
	// to load more away from the process for good (seal_linux.go); sealed
	// says it has been. restart ends a sealed process that has to load a
	// group later, so that the host starts a fresh one which loads it.
	seal    func() error
	sealed  bool
	restart func(reason string)
}

type pendingError struct {
	collector string
	err       error
}

func newPlugin() *plugin {
	return &plugin{
		logf: func(msg string, args ...any) { sdk.Logger().Info(msg, args...) },
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "ebpf",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{
			Capabilities:  []string{"CAP_BPF", "CAP_PERFMON"},
			ReadOnlyPaths: []string{"/sys/kernel/btf", "/sys/devices/system/cpu/possible", "/proc/self/mountinfo", "/sys/devices/kprobe", "/sys/dev/block", "/proc/self/mounts"},
		},
	}
}

// Configure loads and attaches the programs, then (in the shipped binary)
// seals program loading for the rest of the process. Only settings that
// cannot work are refused; a program this kernel cannot run is logged,
// shown in ebpf_program_loaded and counted as a collection error, and the
// others run. The host configures a process once; a sealed process
// refuses a second Configure (errSealed) rather than fail its loads.
func (p *plugin) Configure(ctx context.Context, cfg sdk.Config) error {
	p.mu.Lock()
	sealed := p.sealed
	p.mu.Unlock()
	if sealed {
		return errSealed
	}
	if err := p.configure(ctx, cfg); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sealLocked()
}

func (p *plugin) configure(ctx context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	p.Close() // a second Configure starts over
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = c
	p.tracefs = c.TracefsPath
	if p.tracefs == "" {
		p.tracefs = filepath.Join(cfg.Paths.Sysfs, "kernel", "tracing")
	}
	p.mounts = filepath.Join(cfg.Paths.Procfs, "self", "mounts")
	p.devices = newDeviceNamer(cfg.Paths.Sysfs)
	p.retrans = newRetransmitTotals()
	p.conns = newConnTotals()
	p.rttTotals = newRTTTotals()
	p.watch = newWatchState()
	p.nfs = nfsLatency{}
	p.programs = nil
	p.pending = nil
	defer p.beginLoads()() // before p.mu.Unlock: end runs with the lock held

	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later ones
	// to the cgroup, and this is a no-op.
	if err := rlimit.RemoveMemlock(); err != nil {
		p.logf("cannot lift RLIMIT_MEMLOCK; on kernels before 5.11 the programs may not load", "error", err.Error())
	}
	if c.diskEnabled() {
		p.disk = p.loadGroup("disk", collectorDisk, func() (*ebpf.CollectionSpec, error) {
			s, err := diskSpec(c.bounds)
			return s, err
		})
	}
	if c.tcpEnabled() {
		p.tcp = p.loadGroup("tcp_retransmits", collectorTCP, func() (*ebpf.CollectionSpec, error) {
			s, err := tcpSpec(c.MaxDestinations)
			return s, err
		})
	}
	if !c.connEnabled() {
		p.logf("ebpf programs not loaded", "group", "object_store_connections", "reason", "no object_store_endpoints to watch (object_store_connections: true loads them anyway)")
	} else {
		p.conn = p.loadGroup("object_store_connections", collectorConnections, func() (*ebpf.CollectionSpec, error) {
			s, err := connSpec(c.connBounds)
			return s, err
		})
	}
	if c.rttEnabled() {
		p.rtt = p.loadGroup(collectorRTT, collectorRTT, func() (*ebpf.CollectionSpec, error) {
			s, err := rttSpec(c.rttBounds, c.MaxDestinations)
			return s, err
		})
	}
	if p.tcp != nil || p.conn != nil || p.rtt != nil || c.nfsLatencyMode() != nfsLatencyOff {
		p.refreshLocked(ctx)
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.refreshLoop(time.Duration(c.RefreshInterval), p.stop, p.done)
	}
	return nil
}

// loadGroup loads one group of programs in the configured attach modes and
// records its states; a group that does not run is a pending error.
func (p *plugin) loadGroup(group, collector string, specFor func() (*ebpf.CollectionSpec, error)) *probe {
	spec, err := specFor()
	if err != nil {
		p.failLater(collector, fmt.Errorf("%s programs: %w", group, err))
		return nil
	}
	running, states, err := loadGroup(group, spec, p.cfg.attachVariants(group), p.tracefs, p.loadOptions(ebpf.ProgramOptions{}), p.logf)
	p.programs = append(p.programs, states...)
	if err != nil {
		p.failLater(collector, err)
	}
	return running
}

// failLater queues a failure found outside Collect for the next Collect,
// which counts and reports it.
func (p *plugin) failLater(collector string, err error) {
	p.pending = append(p.pending, pendingError{collector, err})
}

// Close detaches and unloads every program and stops the refresher.
func (p *plugin) Close() {
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop, p.done = nil, nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range []**probe{&p.disk, &p.tcp, &p.conn, &p.rtt} {
		if *pr != nil {
			(*pr).Close()
			*pr = nil
		}
	}
	p.nfs.close()
}

func (p *plugin) refreshLoop(every time.Duration, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.refreshLocked(context.Background())
			p.mu.Unlock()
		}
	}
}

// refreshLocked detects the NFS servers, resolves the object-store
// endpoints and writes the filter maps. A failure is logged and counted
// when it starts (or changes), not again on every refresh while it lasts.
func (p *plugin) refreshLocked(ctx context.Context) {
	servers := p.cfg.nfsServers
	if len(servers) == 0 {
		found, err := nfsServers(p.mounts)
		switch {
		case err != nil:
			p.watch.report(p, collectorNFSServers, "", fmt.Errorf("detect NFS servers: %w", err))
		default:
			// No NFS mount is a node's normal state, not a failure (a
			// healthy node reports no collection error): logged when it
			// starts and seen as ebpf_watched_addresses{class="nfs"} 0.
			p.watch.report(p, collectorNFSServers, "", nil)
			if none := len(found) == 0; none != p.watch.noNFS {
				p.watch.noNFS = none
				if none {
					p.logf("no NFS server to watch", "mounts", p.mounts, "detail", "no nfs or nfs4 mount and nfs_servers is not set; retransmissions to NFS are counted once one is mounted")
				} else {
					p.logf("NFS servers to watch", "servers", fmt.Sprint(found))
				}
			}
		}
		servers = found
	}
	if len(servers) > maxNFSServers {
		p.watch.report(p, collectorNFSServers, "limit", fmt.Errorf("%d NFS servers, only the first %d are watched", len(servers), maxNFSServers))
		servers = servers[:maxNFSServers]
	}
	p.watch.nfs = servers

	resolved := resolveAll(ctx, p.cfg.ObjectStoreEndpoints)
	p.watch.prevEndpointOf, p.watch.endpointOf = p.watch.endpointOf, map[netip.Addr][]string{}
	for i, e := range p.cfg.ObjectStoreEndpoints {
		p.watch.report(p, collectorObjectStore, e, resolved[i].err)
		for _, a := range resolved[i].addrs {
			p.watch.endpointOf[a] = append(p.watch.endpointOf[a], e)
		}
	}

	ws := newWatchSet()
	ws.add(classNFS, servers, p.cfg.NFSPorts)
	var storeAddrs []netip.Addr
	for a := range p.watch.endpointOf {
		storeAddrs = append(storeAddrs, a)
	}
	ws.add(classObjectStore, storeAddrs, p.cfg.ObjectStorePorts)
	if p.tcp != nil {
		if err := applyWatchSet(p.tcp, ws); err != nil {
			p.failLater(collectorTCP, err)
		}
	}
	if p.conn != nil {
		if err := applyWatchSet(p.conn, ws); err != nil {
			p.failLater(collectorConnections, err)
		}
	}
	if p.rtt != nil {
		if err := applyWatchSet(p.rtt, ws); err != nil {
			p.failLater(collectorRTT, err)
		}
	}
	p.watch.addrs = map[string]int{"nfs": len(servers), "object_store": len(storeAddrs)}
	p.refreshNFSLatency()
}

type resolution struct {
	addrs []netip.Addr
	err   error
}

// resolveAll resolves the endpoints concurrently, so that the slowest
// bounds the refresh, not their sum.
func resolveAll(ctx context.Context, endpoints []string) []resolution {
	out := make([]resolution, len(endpoints))
	var wg sync.WaitGroup
	for i, e := range endpoints {
		wg.Go(func() {
			out[i].addrs, out[i].err = resolveEndpoint(ctx, net.DefaultResolver, e)
		})
	}
	wg.Wait()
	return out
}

// watchState is what the filter holds and which failures are ongoing.
type watchState struct {
	nfs            []netip.Addr
	endpointOf     map[netip.Addr][]string
	prevEndpointOf map[netip.Addr][]string // the previous resolution, for counts of addresses just dropped
	addrs          map[string]int
	failing        map[string]string // collector/subject -> error text
	noNFS          bool              // detection found no NFS mount (logged once)
}

func newWatchState() watchState {
	return watchState{endpointOf: map[netip.Addr][]string{}, failing: map[string]string{}}
}

// report notes the state of one subject (an endpoint, the NFS detection):
// a new or changed error is logged and queued, a recovery logged.
func (s *watchState) report(p *plugin, collector, subject string, err error) {
	key := collector + "/" + subject
	prev, was := s.failing[key]
	if err == nil {
		if was {
			p.logf("recovered", "collector", collector, "subject", subject)
			delete(s.failing, key)
		}
		return
	}
	if was && prev == err.Error() {
		return
	}
	s.failing[key] = err.Error()
	p.logf("watch list incomplete", "collector", collector, "error", err.Error())
	p.failLater(collector, err)
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.writeErrors(w)
	for _, e := range p.pending {
		p.errs.Fail(w, e.collector, e.err)
	}
	p.pending = nil
	for _, s := range p.programs {
		v := 0.0
		if s.loaded {
			v = 1
		}
		w.Gauge(descProgramLoaded, v, s.event, s.attach)
	}
	if p.disk != nil {
		if err := p.writeDisk(w); err != nil {
			p.errs.Fail(w, collectorDisk, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.tcp != nil {
		if err := p.writeTCP(w); err != nil {
			p.errs.Fail(w, collectorTCP, err)
		}
	}
	if p.conn != nil {
		if err := p.writeConn(w); err != nil {
			p.errs.Fail(w, collectorConnections, err)
		}
	}
	if err := p.writeRTT(w); err != nil {
		p.errs.Fail(w, collectorRTT, err)
	}
	if err := p.writeNFS(w); err != nil {
		p.errs.Fail(w, collectorNFSLatency, err)
	}
	return nil
}

func (p *plugin) writeConn(w *sdk.Writer) error {
	watched := func(a netip.Addr) bool {
		return len(p.watch.endpointOf[a]) > 0 || len(p.watch.prevEndpointOf[a]) > 0
	}
	counts, readErr := readConnStats(p.conn.coll.Maps["conn_stats"], watched)
	if counts == nil {
		return readErr
	}
	p.conns.update(counts, p.labelsOf)
	for _, e := range p.cfg.ObjectStoreEndpoints {
		p.conns.ensure(e)
	}
	n := len(p.cfg.connBounds)
	for name, t := range p.conns.totals {
		cumulative := make([]uint64, n)
		var sum uint64
		for i := range cumulative {
			sum += t[ccBuckets+i]
			cumulative[i] = sum
		}
		count := sum + t[ccBuckets+n]
		w.Counter(descObjectStoreConnections, float64(t[ccConnections]), name)
		writeLatency(w, p.cfg.nativeHistograms(), descObjectStoreLatency, p.cfg.connBounds, cumulative, count, float64(t[ccLatencyNs])/1e9, name)
		w.Counter(descObjectStoreSent, float64(t[ccSent]), name)
		w.Counter(descObjectStoreReceived, float64(t[ccReceived]), name)
	}
	full, err := readPerCPUCounter(p.conn.coll.Maps["conn_counters"], connStatsFull)
	if err != nil {
		return errors.Join(readErr, fmt.Errorf("read conn_counters: %w", err))
	}
	w.Counter(descEventsDropped, float64(full), reasonConnStatsFull)
	return readErr
}

func (p *plugin) writeErrors(w *sdk.Writer) {
	p.errs.Write(w, descCollectionErrors, errorCollectors...)
}

func (p *plugin) writeDisk(w *sdk.Writer) error {
	stats, err := readDiskStats(p.disk.coll.Maps["disk_stats"])
	if err != nil {
		return err
	}
	var errs []error
	for key, t := range stats {
		dev, err := p.devices.name(key.Dev)
		if err != nil {
			errs = append(errs, fmt.Errorf("name device %s: %w", dev, err))
		}
		cumulative := make([]uint64, len(p.cfg.bounds))
		var n uint64
		for i := range cumulative {
			n += t.buckets[i]
			cumulative[i] = n
		}
		count := n + t.buckets[len(p.cfg.bounds)]
		seconds := float64(t.latencyNs) / 1e9
		switch key.Op {
		case opRead:
			w.Counter(descDiskReads, float64(t.ios), dev)
			w.Counter(descDiskReadBytes, float64(t.bytes), dev)
			writeLatency(w, p.cfg.nativeHistograms(), descDiskReadHist, p.cfg.bounds, cumulative, count, seconds, dev)
		case opWrite:
			w.Counter(descDiskWrites, float64(t.ios), dev)
			w.Counter(descDiskWriteBytes, float64(t.bytes), dev)
			writeLatency(w, p.cfg.nativeHistograms(), descDiskWriteHist, p.cfg.bounds, cumulative, count, seconds, dev)
		}
	}
	errMap := p.disk.coll.Maps["disk_errors"]
	for _, d := range []struct {
		index  uint32
		reason string
	}{{diskErrStatsFull, reasonDiskStatsFull}, {diskErrStartUpdate, reasonDiskStartUpdate}} {
		n, err := readPerCPUCounter(errMap, d.index)
		if err != nil {
			errs = append(errs, fmt.Errorf("read disk_errors: %w", err))
			continue
		}
		w.Counter(descEventsDropped, float64(n), d.reason)
	}
	return errors.Join(errs...)
}

func (p *plugin) writeTCP(w *sdk.Writer) error {
	counts, err := readRetransmits(p.tcp.coll.Maps["retransmits"])
	if err != nil {
		return err
	}
	p.retrans.update(counts, p.labelsOf)
	// Every watched destination from the first scrape on, at 0 until it
	// retransmits, so rate() works from zero.
	for _, a := range p.watch.nfs {
		p.retrans.ensure(classNFS, a.String())
	}
	for _, e := range p.cfg.ObjectStoreEndpoints {
		p.retrans.ensure(classObjectStore, e)
	}
	for k, n := range p.retrans.totals {
		switch k.class {
		case classNFS:
			w.Counter(descNFSRetransmits, float64(n), k.name)
		case classObjectStore:
			w.Counter(descObjectStoreRetransmits, float64(n), k.name)
		}
	}
	counters := p.tcp.coll.Maps["tcp_counters"]
	inserted, err := readPerCPUCounter(counters, tcpInserted)
	if err != nil {
		return fmt.Errorf("read tcp_counters: %w", err)
	}
	failed, err := readPerCPUCounter(counters, tcpInsertFailed)
	if err != nil {
		return fmt.Errorf("read tcp_counters: %w", err)
	}
	present := uint64(len(counts))
	evicted := uint64(0)
	if inserted > present {
		evicted = inserted - present
	}
	w.Gauge(descTCPDestinations, float64(present))
	w.Counter(descTCPEvicted, float64(evicted))
	w.Counter(descEventsDropped, float64(failed), reasonTCPInsertFailed)
	for _, class := range []string{"nfs", "object_store"} {
		w.Gauge(descWatchedAddrs, float64(p.watch.addrs[class]), class)
	}
	return nil
}

// labelsOf names the series a destination's retransmissions count in: the
// NFS server's address, or every endpoint the address was resolved for
// (now or at the previous refresh).
func (p *plugin) labelsOf(d destination) []string {
	switch d.class {
	case classNFS:
		return []string{d.addr.String()}
	case classObjectStore:
		if names := p.watch.endpointOf[d.addr]; len(names) > 0 {
			return names
		}
		return p.watch.prevEndpointOf[d.addr]
	}
	return nil
}

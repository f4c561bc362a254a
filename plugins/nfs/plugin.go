package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
	"github.com/plexporter/plexporter/sdk"
)

// plugin exports NFS client statistics per volume, transport lane and
// server connection.
type plugin struct {
	mountstats string
	netDir     string
	namer      *nfsvolume.Namer
	ops        []string
	port       uint64

	mu      sync.Mutex
	errs    sdk.CollectionErrors // nfs_collection_errors_total
	history *history             // monotonic sums across superblocks
}

func newPlugin() *plugin {
	return &plugin{history: newHistory()}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "nfs",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{"/proc/self/mountstats", "/proc/self/mountinfo", "/proc/self/net/tcp", "/proc/self/net/tcp6"}},
	}
}

func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if c.MountstatsPath == "" {
		c.MountstatsPath = filepath.Join(cfg.Paths.Procfs, "self", "mountstats")
	}
	if c.NetDir == "" {
		c.NetDir = filepath.Join(filepath.Dir(c.MountstatsPath), "net")
	}
	namer, err := nfsvolume.New(c.VolumeIDRegex)
	if err != nil {
		return fmt.Errorf("volume_id_regex: %w", err)
	}
	p.mountstats, p.netDir, p.namer, p.ops, p.port = c.MountstatsPath, c.NetDir, namer, c.Operations, c.ServerPort
	return nil
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	defer p.writeErrors(w)

	// Read mountstats, mountinfo and the socket tables back to back so that
	// the join describes one moment.
	blocks, perrs, err := readMountstats(p.mountstats)
	if err != nil {
		p.errs.Fail(w, collectorMountstats, err)
		return nil
	}
	supers, serrs := superblockKeys(p.mountstats, blocks)
	var socks []socket
	tablesOK := false
	if w.AnyEnabled(socketDescs...) {
		var serrs []error
		socks, tablesOK, serrs = readSockets(p.netDir)
		for _, e := range serrs {
			p.errs.Fail(w, collectorTCP, e)
		}
	}
	for _, e := range serrs {
		p.errs.Fail(w, collectorMountinfo, e)
	}
	for _, e := range perrs {
		p.errs.Fail(w, collectorMount, e)
	}
	for _, b := range blocks {
		if bad := b.implausible(); len(bad) > 0 {
			p.errs.Fail(w, collectorMount, fmt.Errorf("mount %s: not exported, values of 2^63 or more (a negative kernel sum printed unsigned): %s",
				unescapeOctal(b.mountPoint), strings.Join(bad, ", ")))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	vols := buildVolumes(blocks, supers, p.namer, p.port)
	p.mu.Lock()
	totals := p.history.totals(vols)
	p.mu.Unlock()
	var j join
	if tablesOK {
		j = joinSockets(vols, socks, p.port)
	}
	for vi, v := range vols {
		if v.unmatched {
			continue // left out this scrape (superblockKeys)
		}
		p.writeOps(w, v, totals[vi])
		p.writeMount(w, v, totals[vi])
		p.writeLanes(w, vi, v, j, tablesOK)
	}
	for _, sc := range j.servers {
		w.Gauge(descServerConnections, float64(len(sc.socks)), sc.server)
		for _, s := range sc.socks {
			c := s.conn()
			w.Gauge(descServerTCPState, float64(s.state), sc.server, c)
			w.Gauge(descServerTxQueue, float64(s.txQueue), sc.server, c)
			w.Gauge(descServerRxQueue, float64(s.rxQueue), sc.server, c)
			w.Gauge(descServerRetransmits, float64(s.retrans), sc.server, c)
		}
	}
	return nil
}

func (p *plugin) writeErrors(w *sdk.Writer) {
	p.errs.Write(w, descCollectionErrors, errorCollectors...)
}

const msPerSecond = 1000

// nfs4Aliases maps a tracked operation name to the NFSv4 procedure that
// answers the same question, for v4 mounts that do not have the tracked
// one: NFSv4 asks for file system statistics with STATFS where v3 has
// FSSTAT. (v4 has no READDIRPLUS: READDIR returns the attributes; no
// alias, because the counts of one are not the counts of the other.)
var nfs4Aliases = map[string]string{"fsstat": "statfs"}

// counter writes a counter from a field the kernel printed; an absent or
// implausible one gets no sample.
func counter(w *sdk.Writer, d *sdk.Desc, f fields, pos int, scale float64, labels ...string) {
	if n, ok := f.get(pos); ok {
		w.Counter(d, float64(n)/scale, labels...)
	}
}

func (p *plugin) writeOps(w *sdk.Writer, v *volume, c *counters) {
	var sends, backlog uint64
	complete := len(v.lanes) > 0
	for _, l := range v.lanes {
		if l.layout == nil {
			complete = false
			break
		}
		s, ok1 := l.get(l.layout.sends)
		b, ok2 := l.get(l.layout.bklogU)
		if !ok1 || !ok2 {
			complete = false
			break
		}
		sends += s
		backlog += b
	}
	if complete && sends > 0 {
		w.Gauge(descRPCBacklogAverage, float64(backlog)/float64(sends), v.id)
	}
	for _, name := range p.ops {
		o, ok := c.ops[name]
		if !ok && strings.HasPrefix(v.kind, "nfs4/") && nfs4Aliases[name] != "" {
			o, ok = c.ops[nfs4Aliases[name]]
		}
		if !ok {
			continue // the kernel prints no such procedure for this mount
		}
		counter(w, descRPCCount, o, opRequests, 1, v.id, name)
		counter(w, descRPCTimeouts, o, opMajorTimeouts, 1, v.id, name)
		if req, ok1 := o.get(opRequests); ok1 {
			if trans, ok2 := o.get(opTransmissions); ok2 {
				w.Counter(descRPCRetransmits, float64(trans-min(trans, req)), v.id, name)
			}
		}
		counter(w, descRPCErrors, o, opErrors, 1, v.id, name)
		counter(w, descRPCRTT, o, opRTTMs, msPerSecond, v.id, name)
		counter(w, descRPCExecute, o, opExecuteMs, msPerSecond, v.id, name)
		counter(w, descRPCQueue, o, opQueueMs, msPerSecond, v.id, name)
		counter(w, descBytesSent, o, opBytesSent, 1, v.id, name)
		counter(w, descBytesReceived, o, opBytesReceived, 1, v.id, name)
	}
}

func (p *plugin) writeMount(w *sdk.Writer, v *volume, c *counters) {
	if v.hasAge {
		w.Gauge(descMountAge, float64(v.age), v.id)
	}
	for _, m := range v.mounts {
		w.Gauge(descMountInfo, 1, v.id, m.mountPoint, v.server, m.export, v.version, v.proto)
	}
	e, b := c.events, c.bytes
	counter(w, descMountCongestionWait, e, eventCongestionWait, 1, v.id)
	counter(w, descMountSillyRename, e, eventSillyRename, 1, v.id)
	counter(w, descMountShortRead, e, eventShortRead, 1, v.id)
	counter(w, descMountShortWrite, e, eventShortWrite, 1, v.id)
	counter(w, descMountDelay, e, eventDelay, 1, v.id)
	if w.Enabled(descMountEvents) {
		for i, name := range eventNames {
			counter(w, descMountEvents, e, i, 1, v.id, name)
		}
	}
	counter(w, descMountNormalRead, b, bytesNormalRead, 1, v.id)
	counter(w, descMountNormalWrite, b, bytesNormalWrite, 1, v.id)
	counter(w, descMountDirectRead, b, bytesDirectRead, 1, v.id)
	counter(w, descMountDirectWrite, b, bytesDirectWrite, 1, v.id)
	counter(w, descMountServerRead, b, bytesServerRead, 1, v.id)
	counter(w, descMountServerWrite, b, bytesServerWrite, 1, v.id)
	counter(w, descMountReadPages, b, bytesReadPages, 1, v.id)
	counter(w, descMountWritePages, b, bytesWritePages, 1, v.id)
}

func (p *plugin) writeLanes(w *sdk.Writer, vi int, v *volume, j join, tablesOK bool) {
	for li := range v.lanes {
		l := &v.lanes[li]
		if l.layout == nil {
			continue // a line the parser could not read
		}
		idx := strconv.Itoa(li)
		lo := l.layout
		laneCounter := func(d *sdk.Desc, pos int) {
			if n, ok := l.get(pos); ok {
				w.Counter(d, float64(n), v.id, idx)
			}
		}
		laneGauge := func(d *sdk.Desc, pos int) {
			if n, ok := l.get(pos); ok {
				w.Gauge(d, float64(n), v.id, idx)
			}
		}
		laneCounter(descXprtSends, lo.sends)
		laneCounter(descXprtRecvs, lo.recvs)
		laneCounter(descXprtBadXids, lo.badXids)
		laneCounter(descXprtRequestU, lo.reqU)
		laneCounter(descXprtBacklogU, lo.bklogU)
		laneCounter(descXprtBinds, lo.bind)
		laneCounter(descXprtConnects, lo.connect) // absent (-1) for udp
		laneGauge(descXprtIdle, lo.idle)
		if lo.slots(v.statVers) {
			laneGauge(descXprtMaxSlots, lo.maxSlots)
			laneCounter(descXprtSendingU, lo.sendingU)
			laneCounter(descXprtPendingU, lo.pendingU)
		}
		if l.proto != "tcp" || !tablesOK {
			continue
		}
		s, ok := j.lanes[lanePos{vi, li}]
		if !ok {
			w.Gauge(descXprtTCPState, 0, v.id, idx)
			continue
		}
		w.Gauge(descXprtTCPState, float64(s.state), v.id, idx)
		w.Gauge(descXprtTxQueue, float64(s.txQueue), v.id, idx)
		w.Gauge(descXprtRxQueue, float64(s.rxQueue), v.id, idx)
		w.Gauge(descXprtRetransmits, float64(s.retrans), v.id, idx)
	}
}

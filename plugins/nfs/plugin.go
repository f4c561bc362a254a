package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/plexporter/plexporter/sdk"
)

// plugin exports NFS client statistics per volume, transport lane and
// server connection.
type plugin struct {
	mountstats string
	netDir     string
	namer      *volumeNamer
	ops        []string
	port       uint64

	mu     sync.Mutex
	errors map[string]float64 // cumulative, by collector
}

func newPlugin() *plugin {
	return &plugin{errors: map[string]float64{}}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "nfs",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{"/proc/self/mountstats", "/proc/self/net/tcp", "/proc/self/net/tcp6"}},
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
	namer, err := newVolumeNamer(c.VolumeIDRegex)
	if err != nil {
		return fmt.Errorf("volume_id_regex: %w", err)
	}
	p.mountstats, p.netDir, p.namer, p.ops, p.port = c.MountstatsPath, c.NetDir, namer, c.Operations, c.ServerPort
	return nil
}

// fail records a partial failure and counts it.
func (p *plugin) fail(w *sdk.Writer, collector string, err error) {
	p.mu.Lock()
	p.errors[collector]++
	p.mu.Unlock()
	w.Error(collector, err)
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	defer p.writeErrors(w)

	// Read mountstats and the socket tables back to back so that the join
	// describes one moment.
	mounts, perrs, err := readMounts(p.mountstats)
	if err != nil {
		p.fail(w, collectorMountstats, err)
		return nil
	}
	var socks []socket
	tablesOK := false
	if anyEnabled(w, socketDescs) {
		var serrs []error
		socks, tablesOK, serrs = readSockets(p.netDir)
		for _, e := range serrs {
			p.fail(w, collectorTCP, e)
		}
	}
	for _, e := range perrs {
		p.fail(w, collectorMount, e)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	vols := buildVolumes(mounts, p.namer, p.port)
	var j join
	if tablesOK {
		j = joinSockets(vols, socks, p.port)
	}
	for vi, v := range vols {
		p.writeOps(w, v)
		p.writeMount(w, v)
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

// anyEnabled tells whether the allowlist lets any of ds through.
func anyEnabled(w *sdk.Writer, ds []*sdk.Desc) bool {
	for _, d := range ds {
		if w.Enabled(d) {
			return true
		}
	}
	return false
}

func (p *plugin) writeErrors(w *sdk.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range errorCollectors {
		w.Counter(descCollectionErrors, p.errors[c], c)
	}
}

const msPerSecond = 1000

func (p *plugin) writeOps(w *sdk.Writer, v *volume) {
	var sends, backlog uint64
	for _, l := range v.lanes {
		sends += l.Sends
		backlog += l.CumulativeBacklog
	}
	if sends > 0 {
		w.Gauge(descRPCBacklog, float64(backlog)/float64(sends), v.id)
	} else {
		w.Gauge(descRPCBacklog, 0, v.id)
	}
	for _, name := range p.ops {
		o := v.ops[name] // zero when the version has no such procedure
		retrans := uint64(0)
		if o.Transmissions > o.Requests {
			retrans = o.Transmissions - o.Requests
		}
		w.Counter(descRPCCount, float64(o.Requests), v.id, name)
		w.Counter(descRPCTimeouts, float64(o.MajorTimeouts), v.id, name)
		w.Counter(descRPCRetransmits, float64(retrans), v.id, name)
		w.Counter(descRPCErrors, float64(o.Errors), v.id, name)
		w.Counter(descRPCRTT, float64(o.CumulativeTotalResponseMilliseconds)/msPerSecond, v.id, name)
		w.Counter(descRPCExecute, float64(o.CumulativeTotalRequestMilliseconds)/msPerSecond, v.id, name)
		w.Counter(descRPCQueue, float64(o.CumulativeQueueMilliseconds)/msPerSecond, v.id, name)
		w.Counter(descBytesSent, float64(o.BytesSent), v.id, name)
		w.Counter(descBytesReceived, float64(o.BytesReceived), v.id, name)
	}
}

func (p *plugin) writeMount(w *sdk.Writer, v *volume) {
	e, b := v.events, v.bytes
	w.Gauge(descMountAge, float64(v.age), v.id)
	w.Counter(descMountCongestionWait, float64(e.CongestionWait), v.id)
	w.Counter(descMountSillyRename, float64(e.SillyRename), v.id)
	w.Counter(descMountShortRead, float64(e.ShortRead), v.id)
	w.Counter(descMountShortWrite, float64(e.ShortWrite), v.id)
	w.Counter(descMountDelay, float64(e.JukeboxDelay), v.id)
	w.Counter(descMountNormalRead, float64(b.Read), v.id)
	w.Counter(descMountNormalWrite, float64(b.Write), v.id)
	w.Counter(descMountDirectRead, float64(b.DirectRead), v.id)
	w.Counter(descMountDirectWrite, float64(b.DirectWrite), v.id)
	w.Counter(descMountServerRead, float64(b.ReadTotal), v.id)
	w.Counter(descMountServerWrite, float64(b.WriteTotal), v.id)
	w.Counter(descMountReadPages, float64(b.ReadPages), v.id)
	w.Counter(descMountWritePages, float64(b.WritePages), v.id)
}

func (p *plugin) writeLanes(w *sdk.Writer, vi int, v *volume, j join, tablesOK bool) {
	for li, l := range v.lanes {
		if l.Protocol == "" {
			continue // a line the tolerant parser could not read
		}
		idx := strconv.Itoa(li)
		hasConnect, hasSlots := fieldsOf(l.Protocol, v.statVers)
		w.Counter(descXprtSends, float64(l.Sends), v.id, idx)
		w.Counter(descXprtRecvs, float64(l.Receives), v.id, idx)
		w.Counter(descXprtBadXids, float64(l.BadTransactionIDs), v.id, idx)
		w.Counter(descXprtRequestU, float64(l.CumulativeActiveRequests), v.id, idx)
		w.Counter(descXprtBacklogU, float64(l.CumulativeBacklog), v.id, idx)
		if hasConnect {
			w.Counter(descXprtConnects, float64(l.Connect), v.id, idx)
			w.Gauge(descXprtIdle, float64(l.IdleTimeSeconds), v.id, idx)
		}
		if hasSlots {
			w.Gauge(descXprtMaxSlots, float64(l.MaximumRPCSlotsUsed), v.id, idx)
			w.Counter(descXprtSendingU, float64(l.CumulativeSendingQueue), v.id, idx)
			w.Counter(descXprtPendingU, float64(l.CumulativePendingQueue), v.id, idx)
		}
		if l.Protocol != "tcp" || !tablesOK {
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

// Command plexporter-nfs is the plexporter plugin for NFS client health per
// volume, per transport lane and per socket, from mountstats and the TCP
// socket tables of the same network namespace.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/plexporter/plexporter/sdk"
)

func main() { sdk.Serve(newPlugin()) }

const version = "0.1.0"

// defaultOperations is the tracked per-op set, exported even at zero.
var defaultOperations = []string{
	"read", "write", "getattr", "lookup", "access", "create", "remove", "rename", "commit",
	"readdir", "readdirplus", "null", "fsstat", "fsinfo", "pathconf",
}

// config is the plugin's section of the host configuration.
type config struct {
	// MountstatsPath defaults to <procfs>/self/mountstats.
	MountstatsPath string `json:"mountstats_path"`
	// NetDir holds tcp and tcp6; defaults to the net/ directory next to
	// mountstats (<procfs>/self/net, /proc/1/net), i.e. the same namespace.
	NetDir string `json:"net_dir"`
	// VolumeIDRegex is applied to the export path (after "server:").
	VolumeIDRegex string `json:"volume_id_regex"`
	// Operations is the tracked per-op set (case-insensitive).
	Operations []string `json:"operations"`
	// ServerPort is the NFS port when a mount has no port= option.
	ServerPort uint64 `json:"server_port"`
}

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
		Version: version,
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{"/proc/self/mountstats", "/proc/self/net/tcp", "/proc/self/net/tcp6"}},
	}
}

func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := config{
		VolumeIDRegex: `([^/]+)/*$`,
		Operations:    slices.Clone(defaultOperations), // Decode writes into the slice
		ServerPort:    2049,
	}
	if err := cfg.Decode(&c); err != nil {
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
	if c.ServerPort == 0 || c.ServerPort > 65535 {
		return fmt.Errorf("server_port: %d is not a port", c.ServerPort)
	}
	seen := map[string]bool{}
	var ops []string
	for _, o := range c.Operations {
		o = strings.ToLower(strings.TrimSpace(o))
		if o == "" {
			return errors.New("operations: empty operation name")
		}
		if !seen[o] {
			seen[o] = true
			ops = append(ops, o)
		}
	}
	p.mountstats, p.netDir, p.namer, p.ops, p.port = c.MountstatsPath, c.NetDir, namer, ops, c.ServerPort
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
		p.fail(w, "mountstats", err)
		return nil
	}
	var socks []socket
	tablesOK := false
	if w.Enabled(xprtTCPState) || w.Enabled(xprtTxQueue) || w.Enabled(xprtRxQueue) || w.Enabled(xprtRetransmits) ||
		w.Enabled(serverTCPState) || w.Enabled(serverTxQueue) || w.Enabled(serverRxQueue) ||
		w.Enabled(serverRetransmits) || w.Enabled(serverConnections) {
		socks, tablesOK = p.readSockets(w)
	}
	for _, e := range perrs {
		p.fail(w, "mount", e)
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
		w.Gauge(serverConnections, float64(len(sc.socks)), sc.server)
		for _, s := range sc.socks {
			c := s.conn()
			w.Gauge(serverTCPState, float64(s.state), sc.server, c)
			w.Gauge(serverTxQueue, float64(s.txQueue), sc.server, c)
			w.Gauge(serverRxQueue, float64(s.rxQueue), sc.server, c)
			w.Gauge(serverRetransmits, float64(s.retrans), sc.server, c)
		}
	}
	return nil
}

// readSockets reads tcp and tcp6. ok is false when the IPv4 table could not
// be read: socket families are then left out rather than reported as 0.
// A missing tcp6 (IPv6 disabled) is not an error.
func (p *plugin) readSockets(w *sdk.Writer) (socks []socket, ok bool) {
	for _, name := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join(p.netDir, name))
		if err != nil {
			if name == "tcp6" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			p.fail(w, "tcp", err)
			if name == "tcp" {
				return nil, false
			}
			continue
		}
		s, bad := parseNetTCP(data)
		if bad > 0 {
			p.fail(w, "tcp", fmt.Errorf("%s: %d unparseable rows skipped", filepath.Join(p.netDir, name), bad))
		}
		socks = append(socks, s...)
	}
	return socks, true
}

func (p *plugin) writeErrors(w *sdk.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range errorCollectors {
		w.Counter(collectionErrors, p.errors[c], c)
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
		w.Gauge(rpcBacklog, float64(backlog)/float64(sends), v.id)
	} else {
		w.Gauge(rpcBacklog, 0, v.id)
	}
	for _, name := range p.ops {
		o := v.ops[name] // zero when the version has no such procedure
		retrans := uint64(0)
		if o.Transmissions > o.Requests {
			retrans = o.Transmissions - o.Requests
		}
		w.Counter(rpcCount, float64(o.Requests), v.id, name)
		w.Counter(rpcTimeouts, float64(o.MajorTimeouts), v.id, name)
		w.Counter(rpcRetransmits, float64(retrans), v.id, name)
		w.Counter(rpcErrors, float64(o.Errors), v.id, name)
		w.Counter(rpcRTT, float64(o.CumulativeTotalResponseMilliseconds)/msPerSecond, v.id, name)
		w.Counter(rpcExecute, float64(o.CumulativeTotalRequestMilliseconds)/msPerSecond, v.id, name)
		w.Counter(rpcQueue, float64(o.CumulativeQueueMilliseconds)/msPerSecond, v.id, name)
		w.Counter(bytesSent, float64(o.BytesSent), v.id, name)
		w.Counter(bytesReceived, float64(o.BytesReceived), v.id, name)
	}
}

func (p *plugin) writeMount(w *sdk.Writer, v *volume) {
	e, b := v.events, v.bytes
	w.Gauge(mountAge, float64(v.age), v.id)
	w.Counter(mountCongestionWait, float64(e.CongestionWait), v.id)
	w.Counter(mountSillyRename, float64(e.SillyRename), v.id)
	w.Counter(mountShortRead, float64(e.ShortRead), v.id)
	w.Counter(mountShortWrite, float64(e.ShortWrite), v.id)
	w.Counter(mountDelay, float64(e.JukeboxDelay), v.id)
	w.Counter(mountNormalRead, float64(b.Read), v.id)
	w.Counter(mountNormalWrite, float64(b.Write), v.id)
	w.Counter(mountDirectRead, float64(b.DirectRead), v.id)
	w.Counter(mountDirectWrite, float64(b.DirectWrite), v.id)
	w.Counter(mountServerRead, float64(b.ReadTotal), v.id)
	w.Counter(mountServerWrite, float64(b.WriteTotal), v.id)
	w.Counter(mountReadPages, float64(b.ReadPages), v.id)
	w.Counter(mountWritePages, float64(b.WritePages), v.id)
}

func (p *plugin) writeLanes(w *sdk.Writer, vi int, v *volume, j join, tablesOK bool) {
	for li, l := range v.lanes {
		if l.Protocol == "" {
			continue // a line the tolerant parser could not read
		}
		idx := strconv.Itoa(li)
		hasConnect, hasSlots := fieldsOf(l.Protocol, v.statVers)
		w.Counter(xprtSends, float64(l.Sends), v.id, idx)
		w.Counter(xprtRecvs, float64(l.Receives), v.id, idx)
		w.Counter(xprtBadXids, float64(l.BadTransactionIDs), v.id, idx)
		w.Counter(xprtRequestU, float64(l.CumulativeActiveRequests), v.id, idx)
		w.Counter(xprtBacklogU, float64(l.CumulativeBacklog), v.id, idx)
		if hasConnect {
			w.Counter(xprtConnects, float64(l.Connect), v.id, idx)
			w.Gauge(xprtIdle, float64(l.IdleTimeSeconds), v.id, idx)
		}
		if hasSlots {
			w.Gauge(xprtMaxSlots, float64(l.MaximumRPCSlotsUsed), v.id, idx)
			w.Counter(xprtSendingU, float64(l.CumulativeSendingQueue), v.id, idx)
			w.Counter(xprtPendingU, float64(l.CumulativePendingQueue), v.id, idx)
		}
		if l.Protocol != "tcp" || !tablesOK {
			continue
		}
		s, ok := j.lanes[lanePos{vi, li}]
		if !ok {
			w.Gauge(xprtTCPState, 0, v.id, idx)
			continue
		}
		w.Gauge(xprtTCPState, float64(s.state), v.id, idx)
		w.Gauge(xprtTxQueue, float64(s.txQueue), v.id, idx)
		w.Gauge(xprtRxQueue, float64(s.rxQueue), v.id, idx)
		w.Gauge(xprtRetransmits, float64(s.retrans), v.id, idx)
	}
}

package main

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
)

// volume is what is exported under one volume_id: the superblocks of one
// export on one server and NFS version (see buildVolumes).
type volume struct {
	id       string
	server   string // host part of the device field, brackets stripped
	serverIP net.IP // nil when the server was mounted by name
	port     uint64 // server port (port= option, else the default)
	statVers string
	kind     string // fstype/vers, e.g. nfs4/4.2
	version  string // vers= option, e.g. 4.2
	proto    string // proto= option, e.g. tcp
	age      uint64 // seconds, of the oldest superblock
	hasAge   bool
	mounts   []mountRef // every mount point of the volume, in mountstats order

	// supers are the distinct superblocks, by superblock key; their
	// counters are summed per volume (history.go).
	supers map[string]*counters
	order  []string // superblock keys in mountstats order
	lanes  []lane

	// unmatched: a block of the volume has no superblock key this scrape
	// (mountinfo did not list its mount, see superblockKeys), so its sum
	// cannot be told; the volume is not exported this scrape and its
	// history is left as it was.
	unmatched bool
}

// mountRef is one mount point of a volume, for nfs_mount_info.
type mountRef struct {
	mountPoint string // unescaped
	export     string
}

// counters are the per-superblock statistics that add up across
// superblocks: per-op, events and bytes (nfs_server iostats and the
// superblock's RPC client metrics are per superblock).
type counters struct {
	ops    map[string]fields // by lower-case operation name
	events fields
	bytes  fields
}

// lane is one transport ("xprt:" line) in scan order. Superblocks of one
// server and version share the server's transports and print the same
// xprt lines, so lanes are taken field by field with max, not summed.
type lane struct {
	xprt
	// srcportConflict is set when merged blocks disagree on the srcport at
	// this index; the lane is then never joined to a socket.
	srcportConflict bool
}

// get returns one field of the lane by its layout position (nothing for
// a line that could not be read).
func (l *lane) get(pos int) (uint64, bool) {
	if l.layout == nil {
		return 0, false
	}
	return l.fields.get(pos)
}

// port is the lane's source port (0 for NFSv4 transports and unreadable
// lines).
func (l *lane) port() uint64 {
	if l.layout == nil {
		return 0
	}
	p, _ := l.get(l.layout.port)
	return p
}

// splitDevice splits an NFS device "server:/export" ("[v6addr]:/export"
// for IPv6) into server and export path.
func splitDevice(dev string) (server, export string) {
	if strings.HasPrefix(dev, "[") {
		if i := strings.Index(dev, "]:"); i > 0 {
			return dev[1:i], dev[i+2:]
		}
	}
	if i := strings.Index(dev, ":"); i >= 0 {
		return dev[:i], dev[i+1:]
	}
	return "", dev
}

// buildVolumes turns the NFS blocks into volumes, in mountstats order of
// first appearance. superblock[i] is block i's superblock key (st_dev from
// mountinfo, see superblockKeys); "" marks the block's volume unmatched.
//
// Rules for blocks that map to the same volume_id:
//   - Blocks of the same server and NFS version (same fstype and vers=)
//     are one volume. Blocks of one superblock (bind mounts, one mount seen
//     through several mount namespaces) print the same statistics and count
//     once. The counters of different superblocks (the export mounted again
//     read-only, or with other options) are summed, so no mount's traffic
//     is lost; history.go keeps the sums monotonic when a superblock goes
//     away. Lanes are the server's transports, shared by the superblocks:
//     max per field (nfs_xprt_idle_seconds: min).
//   - A block of another server or version (an export mounted both with
//     vers=3 and vers=4.2, or the same path on two servers) has transports
//     of its own, so merging would mix unrelated lanes: it is exported as
//     "<volume_id>@<mount point>" instead. The block that comes first in
//     mountstats (mount order) keeps the plain volume_id.
func buildVolumes(blocks []*block, superblock []string, namer *nfsvolume.Namer, defaultPort uint64) []*volume {
	var vols []*volume
	byID := map[string]*volume{}
	for i, b := range blocks {
		server, export := splitDevice(unescapeOctal(b.device))
		mp := unescapeOctal(b.mountPoint)
		v := &volume{
			id:       namer.Name(export),
			kind:     b.fstype + "/" + b.opts["vers"],
			version:  b.opts["vers"],
			proto:    b.opts["proto"],
			server:   server,
			serverIP: net.ParseIP(server),
			port:     defaultPort,
			statVers: b.statVers,
			age:      b.age,
			hasAge:   b.hasAge,
			mounts:   []mountRef{{mountPoint: mp, export: export}},
			supers:   map[string]*counters{},
		}
		if k := superblock[i]; k != "" {
			v.supers[k], v.order = b.counters(), []string{k}
		} else {
			v.unmatched = true
		}
		if ip := net.ParseIP(b.opts["addr"]); ip != nil {
			v.serverIP = ip
		}
		if p, err := strconv.ParseUint(b.opts["port"], 10, 16); err == nil && p != 0 {
			v.port = p
		}
		for _, x := range b.xprts {
			v.lanes = append(v.lanes, lane{xprt: x})
		}
		if prev := byID[v.id]; prev != nil && (prev.server != v.server || prev.kind != v.kind) {
			v.id += "@" + mp
		}
		if prev := byID[v.id]; prev != nil {
			prev.merge(v)
			continue
		}
		byID[v.id] = v
		vols = append(vols, v)
	}
	return vols
}

// counters returns the block's summable statistics.
func (b *block) counters() *counters {
	c := &counters{ops: make(map[string]fields, len(b.ops)), events: b.events, bytes: b.bytes}
	for _, o := range b.ops {
		c.ops[strings.ToLower(o.name)] = o.fields
	}
	return c
}

func (v *volume) merge(o *volume) {
	if o.hasAge && (!v.hasAge || o.age > v.age) {
		v.age, v.hasAge = o.age, true
	}
	v.mounts = append(v.mounts, o.mounts...)
	v.unmatched = v.unmatched || o.unmatched
	for _, k := range o.order {
		if _, ok := v.supers[k]; ok {
			continue // the same superblock again: counts once
		}
		v.supers[k] = o.supers[k]
		v.order = append(v.order, k)
	}
	for i, l := range o.lanes {
		if i >= len(v.lanes) {
			v.lanes = append(v.lanes, l)
			continue
		}
		cur := &v.lanes[i]
		if cur.layout == nil || cur.proto != l.proto || cur.layout != l.layout {
			cur.srcportConflict = true
			continue // different transports at one index: keep the first
		}
		if cur.port() != l.port() {
			cur.srcportConflict = true
		}
		cur.fields = maxFields(cur.fields, l.fields, map[int]bool{cur.layout.port: true}, cur.layout.idle)
	}
}

// maxFields merges two readings of the same transport field by field: the
// larger value, except at minPos (the smaller) and at the keep positions
// (a's value). A field absent or implausible in either reading is absent.
func maxFields(a, b fields, keep map[int]bool, minPos int) fields {
	n := min(len(a.v), len(b.v))
	out := fields{v: make([]uint64, n), bad: a.bad | b.bad}
	for i := range n {
		switch {
		case keep[i]:
			out.v[i] = a.v[i]
		case i == minPos:
			out.v[i] = min(a.v[i], b.v[i])
		default:
			out.v[i] = max(a.v[i], b.v[i])
		}
	}
	return out
}

// sum adds other's counters into c: fields present in either are present.
func (c *counters) add(other *counters) {
	c.events = addFields(c.events, other.events)
	c.bytes = addFields(c.bytes, other.bytes)
	for name, f := range other.ops {
		c.ops[name] = addFields(c.ops[name], f)
	}
}

// decreased tells whether any field of c is below the same field of prev:
// not the superblock prev was read from (a remount), or a wrapped counter.
func (c *counters) decreased(prev *counters) bool {
	below := func(a, b fields) bool {
		for i := range min(len(a.v), len(b.v)) {
			if a.v[i] < b.v[i] {
				return true
			}
		}
		return false
	}
	if below(c.events, prev.events) || below(c.bytes, prev.bytes) {
		return true
	}
	for name, f := range prev.ops {
		if below(c.ops[name], f) {
			return true
		}
	}
	return false
}

func (c *counters) clone() *counters {
	out := &counters{ops: make(map[string]fields, len(c.ops)), events: c.events.clone(), bytes: c.bytes.clone()}
	for k, f := range c.ops {
		out.ops[k] = f.clone()
	}
	return out
}

func (f fields) clone() fields { return fields{v: slices.Clone(f.v), bad: f.bad} }

func addFields(a, b fields) fields {
	out := fields{v: make([]uint64, max(len(a.v), len(b.v))), bad: a.bad | b.bad}
	for i := range out.v {
		if i < len(a.v) {
			out.v[i] += a.v[i]
		}
		if i < len(b.v) {
			out.v[i] += b.v[i]
		}
	}
	return out
}

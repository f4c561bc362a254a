package main

import (
	"net"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// volume is what is exported under one volume_id: the NFS mount blocks that
// map to that id, merged.
type volume struct {
	id       string
	server   string // host part of the device field, brackets stripped
	serverIP net.IP // nil when the server was mounted by name
	port     uint64 // server port (port= option, else the default)
	statVers string
	kind     string                              // fstype/vers, e.g. nfs4/4.2
	age      uint64                              // seconds
	ops      map[string]procfs.NFSOperationStats // by lower-case name
	events   procfs.NFSEventsStats
	bytes    procfs.NFSBytesStats
	lanes    []lane
}

// lane is one transport ("xprt:" line) in scan order.
type lane struct {
	procfs.NFSTransportStats
	// srcportConflict is set when merged blocks disagree on the srcport at
	// this index; the lane is then never joined to a socket.
	srcportConflict bool
}

// volumeNamer derives volume_id from an export path.
type volumeNamer struct {
	re *regexp.Regexp
	// group is the capture group used: the one named volume_id, else 1.
	group int
}

func newVolumeNamer(expr string) (*volumeNamer, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	g := 0
	if i := re.SubexpIndex("volume_id"); i > 0 {
		g = i
	} else if re.NumSubexp() >= 1 {
		g = 1
	}
	return &volumeNamer{re: re, group: g}, nil
}

// name returns the volume_id of an export path: the regex's capture group
// (or whole match), or the export path itself when the regex does not match
// or captures nothing.
func (n *volumeNamer) name(export string) string {
	m := n.re.FindStringSubmatch(export)
	if m == nil || m[n.group] == "" {
		return export
	}
	return m[n.group]
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

// buildVolumes turns the NFS mounts into volumes, in mountstats order of
// first appearance.
//
// Rule for mount blocks that map to the same volume_id:
//   - Blocks of the same server and NFS version (same fstype and vers=)
//     are merged into one set of series by taking, field by field, the
//     maximum (for nfs_xprt_idle_seconds the minimum). Bind mounts and one
//     superblock seen in several mount namespaces print identical blocks, so
//     they count once; different superblocks of one volume (an export
//     mounted by many pods) share the server's transports and report the
//     busiest superblock, as the Crusoe exporter did.
//   - A block of another server or version (an export mounted both with
//     vers=3 and vers=4.2, or the same path on two servers) does not share
//     transports with the first, so merging would mix unrelated lanes: it is
//     exported as "<volume_id>@<mount point>" instead. The block that comes
//     first in mountstats (mount order) keeps the plain volume_id.
func buildVolumes(mounts []*procfs.Mount, namer *volumeNamer, defaultPort uint64) []*volume {
	var vols []*volume
	byID := map[string]*volume{}
	for _, m := range mounts {
		st, ok := m.Stats.(*procfs.MountStatsNFS)
		if !ok || (m.Type != "nfs" && m.Type != "nfs4") {
			continue
		}
		server, export := splitDevice(unescapeOctal(m.Device))
		v := &volume{
			id:       namer.name(export),
			kind:     m.Type + "/" + st.Opts["vers"],
			server:   server,
			serverIP: net.ParseIP(server),
			port:     defaultPort,
			statVers: st.StatVersion,
			age:      uint64(st.Age.Seconds()),
			ops:      map[string]procfs.NFSOperationStats{},
			events:   st.Events,
			bytes:    st.Bytes,
		}
		if ip := net.ParseIP(st.Opts["addr"]); ip != nil {
			v.serverIP = ip
		}
		if p, err := strconv.ParseUint(st.Opts["port"], 10, 16); err == nil && p != 0 {
			v.port = p
		}
		for _, o := range st.Operations {
			v.ops[strings.ToLower(o.Operation)] = o
		}
		for _, x := range st.Transport {
			v.lanes = append(v.lanes, lane{NFSTransportStats: x})
		}
		if prev := byID[v.id]; prev != nil && (prev.server != v.server || prev.kind != v.kind) {
			v.id += "@" + unescapeOctal(m.Mount)
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

func (v *volume) merge(o *volume) {
	v.age = max(v.age, o.age)
	maxFields(&v.events, &o.events)
	maxFields(&v.bytes, &o.bytes)
	for name, op := range o.ops {
		cur, ok := v.ops[name]
		if !ok {
			v.ops[name] = op
			continue
		}
		maxFields(&cur, &op)
		v.ops[name] = cur
	}
	for i, l := range o.lanes {
		if i >= len(v.lanes) {
			v.lanes = append(v.lanes, l)
			continue
		}
		cur := &v.lanes[i]
		if cur.Port != l.Port || cur.Protocol != l.Protocol {
			cur.srcportConflict = true
		}
		idle := min(cur.IdleTimeSeconds, l.IdleTimeSeconds)
		port := cur.Port
		maxFields(&cur.NFSTransportStats, &l.NFSTransportStats)
		cur.IdleTimeSeconds, cur.Port = idle, port
	}
}

// maxFields sets every uint64 field of *dst to max(dst, src). dst and src
// are pointers to the same struct type.
func maxFields[T any](dst, src *T) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range d.NumField() {
		f := d.Field(i)
		if f.Kind() == reflect.Uint64 && s.Field(i).Uint() > f.Uint() {
			f.SetUint(s.Field(i).Uint())
		}
	}
}

// fieldsOf tells which xprt fields a transport line carries, by protocol
// and statvers: udp has no connection fields, rdma and statvers 1.0 lines
// have no max_slots/sending_u/pending_u.
func fieldsOf(protocol, statVers string) (hasConnect, hasSlots bool) {
	hasConnect = protocol == "tcp" || protocol == "rdma"
	hasSlots = (protocol == "tcp" || protocol == "udp") && statVers != "1.0"
	return hasConnect, hasSlots
}

package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// socket is one row of /proc/net/tcp or /proc/net/tcp6.
type socket struct {
	localIP    net.IP
	localPort  uint64
	remoteIP   net.IP
	remotePort uint64
	state      uint64
	txQueue    uint64
	rxQueue    uint64
	retrans    uint64 // retrnsmt column: icsk_retransmits
	uid        uint64
	inode      uint64
}

// kernelOwned tells whether the row can be an NFS client transport: sunrpc
// sockets are kernel sockets (uid 0) with a socket inode; TIME_WAIT
// minisockets (inode 0) are no longer a connection.
func (s socket) kernelOwned() bool { return s.uid == 0 && s.inode != 0 }

// conn is the socket's label value in nfs_server_* families.
func (s socket) conn() string {
	return net.JoinHostPort(s.localIP.String(), strconv.FormatUint(s.localPort, 10))
}

// readSockets reads <netDir>/tcp and tcp6. ok is false when the IPv4 table
// could not be read: socket families are then left out rather than reported
// as 0. A missing tcp6 (IPv6 disabled) is not an error. errs are the
// partial failures: an unreadable table, or rows that did not parse.
func readSockets(netDir string) (socks []socket, ok bool, errs []error) {
	for _, name := range []string{"tcp", "tcp6"} {
		path := filepath.Join(netDir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			if name == "tcp6" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			errs = append(errs, err)
			if name == "tcp" {
				return nil, false, errs
			}
			continue
		}
		s, bad := parseNetTCP(data)
		if bad > 0 {
			errs = append(errs, fmt.Errorf("%s: %d unparseable rows skipped", path, bad))
		}
		socks = append(socks, s...)
	}
	return socks, true, errs
}

// parseNetTCP parses the text of /proc/net/tcp or /proc/net/tcp6 (format of
// tcp4_seq_show / tcp6_seq_show in net/ipv4/tcp_ipv4.c, net/ipv6/tcp_ipv6.c).
//
// Local parsing, because procfs' NetTCP does not expose the retrnsmt column
// (needed for nfs_*_retransmit_timeouts) and only reads <procfs>/net/tcp,
// while the table must come from the same network namespace as the
// mountstats file (<procfs>/<pid>/net/tcp). Rows that do not parse are
// skipped and counted in bad.
func parseNetTCP(data []byte) (socks []socket, bad int) {
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 || (i == 0 && f[0] == "sl") {
			continue
		}
		s, err := parseNetTCPRow(f)
		if err != nil {
			bad++
			continue
		}
		socks = append(socks, s)
	}
	return socks, bad
}

func parseNetTCPRow(f []string) (socket, error) {
	var s socket
	if len(f) < 10 {
		return s, fmt.Errorf("%d fields", len(f))
	}
	var err error
	if s.localIP, s.localPort, err = parseHexAddr(f[1]); err != nil {
		return s, err
	}
	if s.remoteIP, s.remotePort, err = parseHexAddr(f[2]); err != nil {
		return s, err
	}
	if s.state, err = strconv.ParseUint(f[3], 16, 8); err != nil {
		return s, err
	}
	tx, rx, ok := strings.Cut(f[4], ":")
	if !ok {
		return s, fmt.Errorf("queues %q", f[4])
	}
	if s.txQueue, err = strconv.ParseUint(tx, 16, 64); err != nil {
		return s, err
	}
	if s.rxQueue, err = strconv.ParseUint(rx, 16, 64); err != nil {
		return s, err
	}
	if s.retrans, err = strconv.ParseUint(f[6], 16, 64); err != nil {
		return s, err
	}
	if s.uid, err = strconv.ParseUint(f[7], 10, 32); err != nil {
		return s, err
	}
	if s.inode, err = strconv.ParseUint(f[9], 10, 64); err != nil {
		return s, err
	}
	return s, nil
}

// parseHexAddr parses "0100007F:0801": the address as 32-bit words printed
// as native integers (so byte-swapped on little-endian hosts), then the
// port in hex.
func parseHexAddr(s string) (net.IP, uint64, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return nil, 0, err
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, fmt.Errorf("address %q", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		// The kernel prints each 32-bit word of the network-order address
		// as a native integer: undo that load.
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return ip, port, nil
}

// lanePos identifies a lane of a volume.
type lanePos struct{ vol, idx int }

// join is the result of attributing sockets to lanes and servers.
type join struct {
	lanes   map[lanePos]socket
	servers []serverConns
}

type serverConns struct {
	server string
	socks  []socket
}

// joinSockets attributes kernel TCP sockets to transport lanes and servers.
//
// Rules (never guess; see README "Socket join"):
//  1. A socket is an NFS candidate for a volume when it is kernel-owned
//     (uid 0, inode != 0), its remote port is the volume's server port and,
//     when the server was mounted by address, its remote address is that
//     address.
//  2. A tcp lane with a non-zero srcport (NFSv2/v3, which reuse their port
//     across reconnects) gets the candidate whose local port is the srcport,
//     if exactly one exists.
//  3. NFSv4 lanes print srcport 0. Per server, the candidates not claimed by
//     rule 2 are attributed to a srcport-0 tcp lane only when there is
//     exactly one such lane among all volumes of that server and exactly
//     one unclaimed candidate. Otherwise those lanes report state 0.
//  4. Every candidate of a server mounted by address is also reported per
//     server connection (nfs_server_*{server,conn}), claimed or not.
func joinSockets(vols []*volume, socks []socket, defaultPort uint64) join {
	j := join{lanes: map[lanePos]socket{}}
	claimed := map[int]bool{}
	type group struct {
		ip     net.IP
		port   uint64
		zero   []lanePos
		socks  []int
		server string
	}
	groups := map[string]*group{}
	var order []string
	matches := func(s socket, v *volume) bool {
		return s.kernelOwned() && s.remotePort == v.port && (v.serverIP == nil || s.remoteIP.Equal(v.serverIP))
	}
	for vi, v := range vols {
		var g *group
		if v.serverIP != nil {
			key := v.serverIP.String() + "/" + strconv.FormatUint(v.port, 10)
			if g = groups[key]; g == nil {
				g = &group{ip: v.serverIP, port: v.port, server: v.serverIP.String()}
				if v.port != defaultPort {
					g.server = net.JoinHostPort(g.server, strconv.FormatUint(v.port, 10))
				}
				for si, s := range socks {
					if matches(s, v) {
						g.socks = append(g.socks, si)
					}
				}
				groups[key] = g
				order = append(order, key)
			}
		}
		for li := range v.lanes {
			l := &v.lanes[li]
			if l.proto != "tcp" || l.srcportConflict {
				continue
			}
			if l.port() == 0 {
				if g != nil {
					g.zero = append(g.zero, lanePos{vi, li})
				}
				continue
			}
			found := -1
			for si, s := range socks {
				if s.localPort == l.port() && matches(s, v) {
					if found >= 0 {
						found = -2 // ambiguous
						break
					}
					found = si
				}
			}
			if found >= 0 {
				j.lanes[lanePos{vi, li}] = socks[found]
				claimed[found] = true
			}
		}
	}
	for _, key := range order {
		g := groups[key]
		var unclaimed []int
		for _, si := range g.socks {
			if !claimed[si] {
				unclaimed = append(unclaimed, si)
			}
		}
		if len(g.zero) == 1 && len(unclaimed) == 1 {
			j.lanes[g.zero[0]] = socks[unclaimed[0]]
		}
		sc := serverConns{server: g.server}
		for _, si := range g.socks {
			sc.socks = append(sc.socks, socks[si])
		}
		sort.Slice(sc.socks, func(a, b int) bool { return sc.socks[a].conn() < sc.socks[b].conn() })
		j.servers = append(j.servers, sc)
	}
	return j
}

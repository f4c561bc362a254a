package main

import "testing"

// TestJoinRules pins the attribution rules on small hand-made inputs.
func TestJoinRules(t *testing.T) {
	mk := func(lport, rport, state, uid, inode uint64, raddr string) socket {
		r, _, _ := parseHexAddr(raddr + ":0801")
		l, _, _ := parseHexAddr("2900140A:0000")
		return socket{localIP: l, localPort: lport, remoteIP: r, remotePort: rport, state: state, uid: uid, inode: inode}
	}
	server := "0500140A" // 10.20.0.5
	v4 := func(lanes ...uint64) *volume {
		v := &volume{id: "v", port: 2049}
		v.serverIP, _, _ = parseHexAddr(server + ":0801")
		for _, p := range lanes {
			v.lanes = append(v.lanes, lane{xprt: xprt{proto: "tcp", layout: xprtLayouts["tcp"], fields: fields{v: []uint64{p}}}})
		}
		return v
	}
	t.Run("one v4 lane, one socket: attributed by elimination", func(t *testing.T) {
		j := joinSockets([]*volume{v4(0)}, []socket{mk(851, 2049, 1, 0, 7, server)}, 2049)
		if s, ok := j.lanes[lanePos{0, 0}]; !ok || s.localPort != 851 {
			t.Fatalf("lane not attributed: %+v", j.lanes)
		}
	})
	t.Run("two v4 lanes, two sockets: ambiguous", func(t *testing.T) {
		j := joinSockets([]*volume{v4(0, 0)}, []socket{mk(851, 2049, 1, 0, 7, server), mk(927, 2049, 1, 0, 8, server)}, 2049)
		if len(j.lanes) != 0 {
			t.Fatalf("guessed: %+v", j.lanes)
		}
		if len(j.servers) != 1 || len(j.servers[0].socks) != 2 {
			t.Fatalf("servers: %+v", j.servers)
		}
	})
	t.Run("v3 srcport claims, v4 gets the remaining one", func(t *testing.T) {
		v3 := v4(759)
		j := joinSockets([]*volume{v4(0), v3}, []socket{mk(851, 2049, 1, 0, 7, server), mk(759, 2049, 8, 0, 9, server)}, 2049)
		if j.lanes[lanePos{1, 0}].localPort != 759 || j.lanes[lanePos{0, 0}].localPort != 851 {
			t.Fatalf("lanes: %+v", j.lanes)
		}
	})
	t.Run("user, TIME_WAIT and other-server sockets are ignored", func(t *testing.T) {
		socks := []socket{
			mk(700, 2049, 2, 1000, 5, server),  // user probe
			mk(701, 2049, 6, 0, 0, server),     // TIME_WAIT
			mk(702, 2049, 1, 0, 6, "0700140A"), // other server
			mk(703, 20048, 1, 0, 7, server),    // mountd
		}
		j := joinSockets([]*volume{v4(0, 700, 701, 702, 703)}, socks, 2049)
		if len(j.lanes) != 0 || len(j.servers[0].socks) != 0 {
			t.Fatalf("lanes %+v servers %+v", j.lanes, j.servers)
		}
	})
	t.Run("two sockets with the srcport: ambiguous", func(t *testing.T) {
		j := joinSockets([]*volume{v4(759)}, []socket{mk(759, 2049, 1, 0, 7, server), mk(759, 2049, 8, 0, 8, server)}, 2049)
		if len(j.lanes) != 0 {
			t.Fatalf("guessed: %+v", j.lanes)
		}
	})
}

func TestParseHexAddr(t *testing.T) {
	ip, port, err := parseHexAddr("2900140A:0801")
	if err != nil || ip.String() != "10.20.0.41" || port != 2049 {
		t.Fatalf("got %v %d %v", ip, port, err)
	}
	// ::ffff:10.20.0.5 as printed in tcp6 on little endian.
	ip, _, err = parseHexAddr("0000000000000000FFFF00000500140A:0801")
	if err != nil || ip.String() != "10.20.0.5" {
		t.Fatalf("v4-mapped: %v %v", ip, err)
	}
	for _, bad := range []string{"", "0801", "2900140A", "2900140:0801", "ZZ00140A:0801", "2900140A:10000"} {
		if _, _, err := parseHexAddr(bad); err == nil {
			t.Errorf("parseHexAddr(%q) accepted", bad)
		}
	}
}

// FuzzParseNetTCP: never panics; every returned row has valid ports.
func FuzzParseNetTCP(f *testing.F) {
	for _, name := range []string{"tcp-synthetic", "tcp6-synthetic", "tcp-real-6.1", "tcp6-real-6.1"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		socks, _ := parseNetTCP(data)
		for _, s := range socks {
			if s.localPort > 65535 || s.remotePort > 65535 || s.localIP == nil || s.remoteIP == nil {
				t.Fatalf("bad row %+v", s)
			}
			_ = s.conn()
		}
	})
}

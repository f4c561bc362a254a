package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/genetlink/genltest"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fakeNIC is what a driver answers through ethtool netlink. nil maps mean
// the driver lacks the op: STATS_GET then returns the group with no
// counters (as the kernel does), PAUSE_GET/FEC_GET return EOPNOTSUPP unless
// pauseOp/fecOp say the driver has the op but no statistics.
type fakeNIC struct {
	groups           map[uint32]map[uint16]uint64
	histRx, histTx   []rmonBucket
	pauseOp, fecOp   bool
	pause            map[uint16]uint64
	fec              map[uint16][]uint64
	statsErr, anyErr unix.Errno
}

// fakeKernel answers ethtool generic netlink requests the way
// net/ethtool/{stats,pause,fec}.c build their replies (attribute layout,
// nests, NOT_SET counters omitted, STATS_SRC, GRP_PAD), through the
// genetlink test connection.
type fakeKernel struct {
	t        testing.TB
	nics     map[string]*fakeNIC
	absent   bool
	requests map[string]int // "cmd netdev"
	groups   uint32         // groups of the last STATS_GET
	dials    int
}

const fakeFamilyID = 0x1b

func newFakeKernel(t testing.TB, nics map[string]*fakeNIC) *fakeKernel {
	return &fakeKernel{t: t, nics: nics, requests: map[string]int{}}
}

func (k *fakeKernel) dial() (*genetlink.Conn, error) {
	k.dials++
	if k.absent {
		return genltest.Dial(func(genetlink.Message, netlink.Message) ([]genetlink.Message, error) {
			return nil, genltest.Error(int(unix.ENOENT))
		}), nil
	}
	return genltest.Dial(genltest.ServeFamily(genetlink.Family{ID: fakeFamilyID, Version: 1, Name: "ethtool"}, k.serve)), nil
}

func (k *fakeKernel) source() *genlSource { return newGenlSourceDial(k.dial) }

func encode(fn func(ae *netlink.AttributeEncoder)) []byte {
	ae := netlink.NewAttributeEncoder()
	fn(ae)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func u64s(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint64(b[i*8:], x)
	}
	return b
}

// replyHeader is the ETHTOOL_A_*_HEADER nest the kernel puts first.
func replyHeader(ae *netlink.AttributeEncoder, typ uint16, netdev string) {
	ae.Nested(typ, func(h *netlink.AttributeEncoder) error {
		h.Uint32(1, 7) // ETHTOOL_A_HEADER_DEV_INDEX
		h.String(aHeaderDevName, netdev)
		return nil
	})
}

// statsReply encodes an ETHTOOL_MSG_STATS_GET_REPLY for the groups asked.
func statsReply(netdev string, nic *fakeNIC, groups uint32) []byte {
	return encode(func(ae *netlink.AttributeEncoder) {
		replyHeader(ae, aStatsHeader, netdev)
		ae.Uint32(5, 0) // ETHTOOL_A_STATS_SRC (6.6+): aggregate
		for g := uint32(0); g < stdGroupsKnown; g++ {
			if groups&(1<<g) == 0 {
				continue
			}
			ae.Nested(aStatsGrp, func(ga *netlink.AttributeEncoder) error {
				ga.Uint32(aStatsGrpID, g)
				ga.Uint32(3, 20+g) // ETHTOOL_A_STATS_GRP_SS_ID
				if g == groupRMON {
					for _, h := range []struct {
						typ uint16
						bks []rmonBucket
					}{{aStatsGrpHistRx, nic.histRx}, {aStatsGrpHistTx, nic.histTx}} {
						for _, bk := range h.bks {
							ga.Nested(h.typ, func(ha *netlink.AttributeEncoder) error {
								ha.Uint32(aStatsGrpHistBktLow, bk.Low)
								ha.Uint32(aStatsGrpHistBktHi, bk.High)
								ha.Uint64(aStatsGrpHistVal, bk.Value)
								return nil
							})
						}
					}
				}
				for id := uint16(0); id < 32; id++ {
					v, ok := nic.groups[g][id]
					if !ok {
						continue
					}
					ga.Flag(1, true) // ETHTOOL_A_STATS_GRP_PAD, as on strict-alignment hosts
					ga.Nested(aStatsGrpStat, func(sa *netlink.AttributeEncoder) error {
						sa.Uint64(id, v)
						return nil
					})
				}
				return nil
			})
		}
	})
}

func pauseReply(netdev string, nic *fakeNIC) []byte {
	return encode(func(ae *netlink.AttributeEncoder) {
		replyHeader(ae, aPauseHeader, netdev)
		ae.Uint8(2, 0) // AUTONEG
		ae.Uint8(3, 1) // RX
		ae.Uint8(4, 1) // TX
		ae.Nested(aPauseStats, func(sa *netlink.AttributeEncoder) error {
			for _, id := range []uint16{aPauseStatTxFrames, aPauseStatRxFrames} {
				if v, ok := nic.pause[id]; ok {
					sa.Flag(1, true) // ETHTOOL_A_PAUSE_STAT_PAD
					sa.Uint64(id, v)
				}
			}
			return nil
		})
	})
}

func fecReply(netdev string, nic *fakeNIC) []byte {
	return encode(func(ae *netlink.AttributeEncoder) {
		replyHeader(ae, aFECHeader, netdev)
		ae.Nested(2, func(b *netlink.AttributeEncoder) error { // ETHTOOL_A_FEC_MODES, compact bitset
			b.Uint32(aBitsetSize, 128)
			b.Bytes(aBitsetValue, make([]byte, 16))
			return nil
		})
		ae.Uint8(3, 0)  // AUTO
		ae.Uint32(4, 9) // ACTIVE: ETHTOOL_LINK_MODE_FEC_RS_BIT... index
		ae.Nested(aFECStats, func(sa *netlink.AttributeEncoder) error {
			for _, id := range []uint16{aFECStatCorrected, aFECStatUncorr, aFECStatCorrBits} {
				sa.Bytes(id, u64s(nic.fec[id])) // zero length when unset, as the kernel sends it
			}
			return nil
		})
	})
}

func (k *fakeKernel) serve(greq genetlink.Message, nreq netlink.Message) ([]genetlink.Message, error) {
	if nreq.Header.Type != fakeFamilyID {
		return nil, fmt.Errorf("request to family %d", nreq.Header.Type)
	}
	var netdev string
	var flags uint32
	groups := uint32(0)
	ad, err := netlink.NewAttributeDecoder(greq.Data)
	if err != nil {
		return nil, err
	}
	for ad.Next() {
		switch {
		case ad.Type() == aStatsGroups && greq.Header.Command == msgStatsGet:
			ad.Nested(func(b *netlink.AttributeDecoder) error {
				nomask, size := false, uint32(0)
				var val []byte
				for b.Next() {
					switch b.Type() {
					case aBitsetNomask:
						nomask = true
					case aBitsetSize:
						size = b.Uint32()
					case aBitsetValue:
						val = b.Bytes()
					}
				}
				if !nomask || size != stdGroupsKnown || len(val) != 4 {
					return fmt.Errorf("groups bitset nomask=%v size=%d value=%x", nomask, size, val)
				}
				groups = binary.NativeEndian.Uint32(val)
				return nil
			})
		case ad.Type() == aStatsHeader && greq.Header.Command == msgStatsGet,
			ad.Type() == aPauseHeader && greq.Header.Command != msgStatsGet:
			ad.Nested(func(h *netlink.AttributeDecoder) error {
				for h.Next() {
					switch h.Type() {
					case aHeaderDevName:
						netdev = h.String()
					case aHeaderFlags:
						flags = h.Uint32()
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	k.requests[fmt.Sprintf("%d %s", greq.Header.Command, netdev)]++
	nic, ok := k.nics[netdev]
	if !ok {
		return nil, genltest.Error(int(unix.ENODEV))
	}
	if nic.anyErr != 0 {
		return nil, genltest.Error(int(nic.anyErr))
	}
	reply := func(cmd uint8, b []byte) ([]genetlink.Message, error) {
		return []genetlink.Message{{Header: genetlink.Header{Command: cmd, Version: 1}, Data: b}}, nil
	}
	switch greq.Header.Command {
	case msgStatsGet:
		if groups == 0 {
			return nil, genltest.Error(int(unix.EINVAL)) // "no stats requested"
		}
		k.groups = groups
		if nic.statsErr != 0 {
			return nil, genltest.Error(int(nic.statsErr))
		}
		return reply(msgStatsGetReply, statsReply(netdev, nic, groups))
	case msgPauseGet:
		if flags&flagStats == 0 {
			k.t.Errorf("PAUSE_GET %s without ETHTOOL_FLAG_STATS", netdev)
		}
		if !nic.pauseOp {
			return nil, genltest.Error(int(unix.EOPNOTSUPP))
		}
		return reply(msgPauseGetReply, pauseReply(netdev, nic))
	case msgFECGet:
		if flags&flagStats == 0 {
			k.t.Errorf("FEC_GET %s without ETHTOOL_FLAG_STATS", netdev)
		}
		if !nic.fecOp {
			return nil, genltest.Error(int(unix.EOPNOTSUPP))
		}
		return reply(msgFECGetReply, fecReply(netdev, nic))
	}
	return nil, genltest.Error(int(unix.EOPNOTSUPP))
}

// mlx5NIC models what mlx5 answers for the port of testdata/mlx5_ens1f0np0.txt:
// the kernel driver fills the standard groups from the same PPCNT registers
// that `ethtool -S` prints as *_phy (en_stats.c: FramesTransmittedOK =
// tx_packets_phy, OctetsReceivedOK = rx_bytes_phy, the RMON ranges =
// rx_<low>_to_<high>_bytes_phy, pause = {rx,tx}_pause_ctrl_phy, per-lane
// FEC corrected blocks = rx_err_lane_<l>_phy, corrected bits =
// rx_corrected_bits_phy). mlx5 leaves the collision, deferral and internal
// MAC error counters unset and has no tx histogram.
func mlx5NIC() *fakeNIC {
	return &fakeNIC{
		groups: map[uint32]map[uint16]uint64{
			groupEthPhy: {0: 0}, // rx_symbol_err_phy
			groupEthMAC: {
				0: 454501503886, 3: 402366078465, 4: 0, 6: 1877431063177157, 12: 1657118611259582,
				14: 542205, 15: 2, 17: 2110625, 18: 959871, 19: 0, 20: 0, 21: 0,
			},
			groupEthCtrl: {0: 521877, 1: 1823104, 2: 0},
			groupRMON:    {0: 0, 1: 0, 2: 0, 3: 0},
		},
		histRx: []rmonBucket{
			{Low: 0, High: 64, Value: 70118233},
			{Low: 65, High: 127, Value: 612003991},
			{Low: 128, High: 255, Value: 90112877},
			{Low: 256, High: 511, Value: 41220981},
			{Low: 512, High: 1023, Value: 29004113},
			{Low: 1024, High: 1518, Value: 188201776},
			{Low: 1519, High: 2047, Value: 11092004},
			{Low: 2048, High: 4095, Value: 2901112},
			{Low: 4096, High: 8191, Value: 401321423378},
			{Low: 8192, High: 10239, Value: 0},
		},
		pauseOp: true,
		pause:   map[uint16]uint64{aPauseStatTxFrames: 521877, aPauseStatRxFrames: 1823104},
		fecOp:   true,
		fec: map[uint16][]uint64{
			aFECStatCorrected: {1771013, 402111, 388020, 590173, 390709},
			aFECStatUncorr:    {0},
			aFECStatCorrBits:  {1771013},
		},
	}
}

// fixtureKernel: mlx5 PF with everything; ionic has pause and FEC ops but
// no statistics (empty nests and zero-length arrays); eno1 (e1000e-like)
// pause op without statistics and no FEC; the VF and IPoIB netdevs have
// neither op (EOPNOTSUPP), like virtio_net and veth.
func fixtureKernel(t testing.TB) *fakeKernel {
	return newFakeKernel(t, map[string]*fakeNIC{
		"ens1f0np0": mlx5NIC(),
		"enp68s0":   {pauseOp: true, fecOp: true},
		"eno1":      {pauseOp: true},
		"ens1f0v0":  {},
		"ibp196s0":  {},
	})
}

// stdStatsPlugin returns a plugin that reads its standard statistics from
// fixtureKernel (returned too, for its request log and to edit its NICs)
// and its driver statistics from files.
func stdStatsPlugin(t *testing.T, files map[string]string) (*plugin, *fakeKernel) {
	t.Helper()
	k := fixtureKernel(t)
	p := newTestPlugin(newFakeSource(t, files))
	p.std = k.source()
	return p, k
}

func TestStandardStatsGolden(t *testing.T) {
	p, k := stdStatsPlugin(t, fixtureFiles())
	res := runGolden(t, p, sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sysfs.ttar"), Config: map[string]any{"rdma": false}}, "testdata/standard.golden")
	// Every selected netdev asked once per part; all four groups at once.
	for _, n := range []string{"ens1f0np0", "enp68s0", "eno1", "ens1f0v0", "ibp196s0"} {
		for _, cmd := range []int{msgStatsGet, msgPauseGet, msgFECGet} {
			if got := k.requests[fmt.Sprintf("%d %s", cmd, n)]; got != 1 {
				t.Errorf("cmd %d to %s: %d requests", cmd, n, got)
			}
		}
	}
	if k.groups != stdGroupsAllSet {
		t.Errorf("groups requested %#x", k.groups)
	}
	// Only the mlx5 port has series; "no counters" is not a zero.
	for _, fam := range []string{"ethtool_eth_mac_frames_received_ok_total", "ethtool_pause_frames_total", "ethtool_fec_corrected_blocks_total"} {
		for key := range series(t, res, fam) {
			if !strings.HasPrefix(key, "netdev=ens1f0np0") {
				t.Errorf("%s has %s", fam, key)
			}
		}
	}
	if got := series(t, res, "ethtool_eth_mac_late_collisions_total"); len(got) != 0 {
		t.Errorf("unset counter exported: %v", got)
	}
}

func TestStandardStatsOff(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p, k := stdStatsPlugin(t, nil)
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"rdma": false, "standard_stats": false}})
	if len(k.requests) != 0 || k.dials != 0 {
		t.Errorf("standard_stats: false still asked the kernel: %v", k.requests)
	}
	if text := res.Text(t); strings.Contains(text, "ethtool_") {
		t.Errorf("series with standard_stats: false:\n%s", text)
	}
}

func TestStandardStatsSelection(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p, k := stdStatsPlugin(t, nil)
	sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"rdma": false, "include": "^ens", "exclude": "v[0-9]+$"}})
	for key := range k.requests {
		if !strings.HasSuffix(key, " ens1f0np0") {
			t.Errorf("asked about a netdev include/exclude reject: %s", key)
		}
	}
	if len(k.requests) != 3 {
		t.Errorf("requests %v", k.requests)
	}
}

func TestStandardStatsAllowlistPushdown(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p, k := stdStatsPlugin(t, nil)
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"rdma": false},
		EnabledMetrics: []string{"ethtool_rmon_frames_by_size_total"}})
	if k.groups != 1<<groupRMON {
		t.Errorf("groups requested %#x, want only rmon", k.groups)
	}
	for key := range k.requests {
		if !strings.HasPrefix(key, fmt.Sprint(msgStatsGet)+" ") {
			t.Errorf("pause/FEC asked although disabled: %s", key)
		}
	}
	if got := series(t, res, "ethtool_rmon_frames_by_size_total")["netdev=ens1f0np0,direction=rx,low=4096,high=8191"]; got != 401321423378 {
		t.Errorf("rmon 4096-8191 = %v", got)
	}
}

func TestStandardStatsErrors(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p, k := stdStatsPlugin(t, nil)
	k.nics["eno1"].anyErr = unix.EIO
	delete(k.nics, "enp68s0") // vanished between listing and reading: ENODEV
	c := sdktest.Client(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"rdma": false}})
	var res *sdktest.Result
	for range 2 {
		res = sdktest.Collect(t, c, 0)
	}
	if res.Status != nil {
		t.Fatalf("scrape failed: %v", res.Status)
	}
	if len(res.Errors) != 2 {
		t.Fatalf("want 2 partial errors, got %v", res.Errors)
	}
	for _, e := range res.Errors {
		if e.GetCollector() != "standard_stats" {
			t.Errorf("error %v", e)
		}
	}
	if v := series(t, res, "ethtool_collection_errors_total")["collector=standard_stats"]; v != 4 {
		t.Errorf("standard_stats errors = %v, want 4 (2 netdevs x 2 scrapes)", v)
	}
	// The others are still collected.
	if v := series(t, res, "ethtool_pause_frames_total")["netdev=ens1f0np0,direction=rx"]; v != 1823104 {
		t.Errorf("pause rx = %v", v)
	}
	// Kernel answers (errno) keep the connection.
	if k.dials != 1 {
		t.Errorf("dialled %d times", k.dials)
	}
}

func TestStandardStatsFamilyAbsent(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p, k := stdStatsPlugin(t, nil)
	k.absent = true
	c := sdktest.Client(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"rdma": false}})
	for range 2 {
		res := sdktest.Collect(t, c, 0)
		if res.Status != nil || len(res.Errors) != 0 {
			t.Fatalf("status %v errors %v", res.Status, res.Errors)
		}
		if strings.Contains(res.Text(t), "ethtool_eth_") {
			t.Fatal("series without the ethtool family")
		}
	}
	if k.dials != 1 {
		t.Errorf("family looked up %d times; absent is cached", k.dials)
	}
}

func TestStandardStatsSourceDirect(t *testing.T) {
	k := fixtureKernel(t)
	src := k.source()
	defer src.Close()
	ctx := context.Background()
	all := stdRequest{Groups: stdGroupsAllSet, Pause: true, FEC: true}
	st, err := src.StandardStats(ctx, "ens1f0np0", all)
	if err != nil {
		t.Fatal(err)
	}
	if st.Groups[groupEthMAC][12] != 1657118611259582 || len(st.Groups[groupEthMAC]) != 12 {
		t.Errorf("eth-mac = %v", st.Groups[groupEthMAC])
	}
	if len(st.Hist) != 10 || st.Hist[9] != (rmonBucket{Low: 8192, High: 10239}) {
		t.Errorf("hist = %v", st.Hist)
	}
	if got := st.FEC[aFECStatCorrected]; len(got) != 5 || got[3] != 590173 {
		t.Errorf("FEC corrected = %v", got)
	}
	// veth/virtio-like: STATS_GET groups without counters, pause/FEC
	// EOPNOTSUPP: no statistics, no error.
	st, err = src.StandardStats(ctx, "ens1f0v0", all)
	if err != nil || !st.empty() {
		t.Errorf("ens1f0v0: %+v, %v", st, err)
	}
	// ionic-like: ops present, nothing filled in.
	st, err = src.StandardStats(ctx, "enp68s0", all)
	if err != nil || !st.empty() {
		t.Errorf("enp68s0: %+v, %v", st, err)
	}
	if _, err := src.StandardStats(ctx, "nosuch0", all); !errors.Is(err, unix.ENODEV) {
		t.Errorf("missing netdev: %v", err)
	}
	// A cancelled context stops before asking.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.StandardStats(cctx, "ens1f0np0", all); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	st := &stdStats{}
	// A stat that is not a u64.
	bad := encode(func(ae *netlink.AttributeEncoder) {
		ae.Nested(aStatsGrp, func(g *netlink.AttributeEncoder) error {
			g.Uint32(aStatsGrpID, groupEthMAC)
			g.Nested(aStatsGrpStat, func(s *netlink.AttributeEncoder) error { s.Uint32(0, 1); return nil })
			return nil
		})
	})
	if err := decodeStatsReply(bad, st); err == nil {
		t.Error("u32 stat accepted")
	}
	noID := encode(func(ae *netlink.AttributeEncoder) {
		ae.Nested(aStatsGrp, func(g *netlink.AttributeEncoder) error { g.Uint32(3, 1); return nil })
	})
	if err := decodeStatsReply(noID, &stdStats{}); err == nil {
		t.Error("group without id accepted")
	}
	fec := encode(func(ae *netlink.AttributeEncoder) {
		ae.Nested(aFECStats, func(s *netlink.AttributeEncoder) error { s.Bytes(aFECStatCorrected, make([]byte, 12)); return nil })
	})
	if err := decodeFECReply(fec, &stdStats{}); err == nil {
		t.Error("12-byte FEC array accepted")
	}
	if err := decodePauseReply([]byte{1, 2, 3}, &stdStats{}); err == nil {
		t.Error("truncated attribute accepted")
	}
	// Unknown groups, stats and attributes of newer kernels are skipped.
	newer := encode(func(ae *netlink.AttributeEncoder) {
		ae.Uint32(99, 1)
		ae.Nested(aStatsGrp, func(g *netlink.AttributeEncoder) error {
			g.Uint32(aStatsGrpID, 7)
			g.Nested(aStatsGrpStat, func(s *netlink.AttributeEncoder) error { s.Uint64(0, 5); return nil })
			return nil
		})
	})
	st = &stdStats{}
	if err := decodeStatsReply(newer, st); err != nil || len(st.Groups[7]) != 1 {
		t.Errorf("newer reply: %v %+v", err, st)
	}
}

// noStdStats answers every netdev with no standard statistics, like
// virtio_net: the default of newTestPlugin, so tests of other parts never
// touch the host's netlink.
type noStdStats struct{}

func (noStdStats) StandardStats(context.Context, string, stdRequest) (*stdStats, error) {
	return &stdStats{}, nil
}

// FuzzDecodeStandard feeds arbitrary bytes to the three reply decoders:
// they must never panic, and what they return must be writable (no
// duplicate series).
func FuzzDecodeStandard(f *testing.F) {
	nic := mlx5NIC()
	f.Add(statsReply("ens1f0np0", nic, stdGroupsAllSet))
	f.Add(pauseReply("ens1f0np0", nic))
	f.Add(fecReply("ens1f0np0", nic))
	f.Add(statsReply("enp68s0", &fakeNIC{}, stdGroupsAllSet))
	f.Add(fecReply("enp68s0", &fakeNIC{}))
	f.Add([]byte{})
	f.Add([]byte{4, 0, 4, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range []func([]byte, *stdStats) error{decodeStatsReply, decodePauseReply, decodeFECReply} {
			st := &stdStats{}
			if err := dec(b, st); err != nil {
				continue
			}
			seen := map[string]bool{}
			for _, bk := range st.Hist {
				key := fmt.Sprint(bk.TX, bk.Low, bk.High)
				if seen[key] {
					t.Fatalf("duplicate bucket %s", key)
				}
				seen[key] = true
			}
			for id, v := range st.FEC {
				if len(v) == 0 {
					t.Fatalf("empty FEC array %d kept", id)
				}
			}
		}
	})
}

// A part the driver lacks (EOPNOTSUPP) is not asked again until
// unsupportedRecheck has passed; the parts it has, and every part of
// another netdev, are asked on every read. After the recheck a driver that
// gained the operation is read.
func TestStandardStatsUnsupportedIsNotAskedAgain(t *testing.T) {
	k := fixtureKernel(t)
	src := k.source()
	defer src.Close()
	clock := time.Unix(1_800_000_000, 0)
	src.now = func() time.Time { return clock }
	ctx := context.Background()
	all := stdRequest{Groups: stdGroupsAllSet, Pause: true, FEC: true}
	read := func(netdev string) *stdStats {
		t.Helper()
		st, err := src.StandardStats(ctx, netdev, all)
		if err != nil {
			t.Fatalf("%s: %v", netdev, err)
		}
		return st
	}
	asked := func(cmd int, netdev string) int { return k.requests[fmt.Sprintf("%d %s", cmd, netdev)] }
	for range 3 {
		read("ens1f0v0") // veth-like: STATS_GET answers (empty), pause and FEC EOPNOTSUPP
		read("ens1f0np0")
		clock = clock.Add(time.Minute)
	}
	if got := []int{asked(msgStatsGet, "ens1f0v0"), asked(msgPauseGet, "ens1f0v0"), asked(msgFECGet, "ens1f0v0")}; !slices.Equal(got, []int{3, 1, 1}) {
		t.Errorf("ens1f0v0 asked (stats, pause, FEC) %v times, want [3 1 1]", got)
	}
	if got := []int{asked(msgStatsGet, "ens1f0np0"), asked(msgPauseGet, "ens1f0np0"), asked(msgFECGet, "ens1f0np0")}; !slices.Equal(got, []int{3, 3, 3}) {
		t.Errorf("ens1f0np0 asked (stats, pause, FEC) %v times, want [3 3 3]", got)
	}
	// The driver gains the pause operation; it is read once the recheck
	// has passed, not before.
	k.nics["ens1f0v0"].pauseOp = true
	k.nics["ens1f0v0"].pause = mlx5NIC().pause
	clock = clock.Add(unsupportedRecheck - 3*time.Minute - time.Second)
	if st := read("ens1f0v0"); len(st.Pause) != 0 {
		t.Errorf("pause read before the recheck: %v", st.Pause)
	}
	clock = clock.Add(2 * time.Second)
	if st := read("ens1f0v0"); len(st.Pause) == 0 {
		t.Error("pause not read after the recheck")
	}
	if got := asked(msgPauseGet, "ens1f0v0"); got != 2 {
		t.Errorf("pause asked %d times, want 2", got)
	}
	// Answers older than the recheck are forgotten, not kept for ever.
	clock = clock.Add(2 * unsupportedRecheck)
	read("ens1f0np0")
	if len(src.unsupported) != 0 {
		t.Errorf("%d stale EOPNOTSUPP answers kept", len(src.unsupported))
	}
}

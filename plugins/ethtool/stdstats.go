package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/mdlayher/netlink"

	"github.com/plexporter/plexporter/sdk"
)

// Ethtool netlink (generic netlink family "ethtool") message and attribute
// numbers, from the kernel's include/uapi/linux/ethtool_netlink.h (and
// ethtool_netlink_generated.h since 6.14). They are ABI: numbers are only
// ever appended. Documentation/networking/ethtool-netlink.rst describes the
// messages.
const (
	ethtoolGenlName = "ethtool"

	msgPauseGet      = 21 // ETHTOOL_MSG_PAUSE_GET
	msgFECGet        = 29 // ETHTOOL_MSG_FEC_GET
	msgStatsGet      = 32 // ETHTOOL_MSG_STATS_GET
	msgPauseGetReply = 22 // ETHTOOL_MSG_PAUSE_GET_REPLY
	msgFECGetReply   = 30 // ETHTOOL_MSG_FEC_GET_REPLY
	msgStatsGetReply = 33 // ETHTOOL_MSG_STATS_GET_REPLY

	aHeaderDevName = 2 // ETHTOOL_A_HEADER_DEV_NAME, string
	aHeaderFlags   = 3 // ETHTOOL_A_HEADER_FLAGS, u32

	flagCompactBitsets = 1 << 0 // ETHTOOL_FLAG_COMPACT_BITSETS
	flagStats          = 1 << 2 // ETHTOOL_FLAG_STATS

	aBitsetNomask = 1 // ETHTOOL_A_BITSET_NOMASK, flag
	aBitsetSize   = 2 // ETHTOOL_A_BITSET_SIZE, u32
	aBitsetValue  = 4 // ETHTOOL_A_BITSET_VALUE, u32 words

	aPauseHeader       = 1 // ETHTOOL_A_PAUSE_HEADER
	aPauseStats        = 5 // ETHTOOL_A_PAUSE_STATS, nest of ETHTOOL_A_PAUSE_STAT_*
	aPauseStatTxFrames = 2 // ETHTOOL_A_PAUSE_STAT_TX_FRAMES, u64
	aPauseStatRxFrames = 3 // ETHTOOL_A_PAUSE_STAT_RX_FRAMES, u64

	aFECHeader        = 1 // ETHTOOL_A_FEC_HEADER
	aFECStats         = 5 // ETHTOOL_A_FEC_STATS, nest of ETHTOOL_A_FEC_STAT_*
	aFECStatCorrected = 2 // ETHTOOL_A_FEC_STAT_CORRECTED, u64 array [total, lane0, ...]
	aFECStatUncorr    = 3 // ETHTOOL_A_FEC_STAT_UNCORR, u64 array
	aFECStatCorrBits  = 4 // ETHTOOL_A_FEC_STAT_CORR_BITS, u64 array

	aStatsHeader = 2 // ETHTOOL_A_STATS_HEADER
	aStatsGroups = 3 // ETHTOOL_A_STATS_GROUPS, bitset of ETHTOOL_STATS_*
	aStatsGrp    = 4 // ETHTOOL_A_STATS_GRP, nest of ETHTOOL_A_STATS_GRP_*

	aStatsGrpID         = 2 // ETHTOOL_A_STATS_GRP_ID, u32
	aStatsGrpStat       = 4 // ETHTOOL_A_STATS_GRP_STAT, nest holding one u64 whose type is the stat id
	aStatsGrpHistRx     = 5 // ETHTOOL_A_STATS_GRP_HIST_RX, nest
	aStatsGrpHistTx     = 6 // ETHTOOL_A_STATS_GRP_HIST_TX, nest
	aStatsGrpHistBktLow = 7 // ETHTOOL_A_STATS_GRP_HIST_BKT_LOW, u32
	aStatsGrpHistBktHi  = 8 // ETHTOOL_A_STATS_GRP_HIST_BKT_HI, u32
	aStatsGrpHistVal    = 9 // ETHTOOL_A_STATS_GRP_HIST_VAL, u64

	// ETHTOOL_STATS_* group ids (bit numbers in ETHTOOL_A_STATS_GROUPS).
	groupEthPhy     = 0
	groupEthMAC     = 1
	groupEthCtrl    = 2
	groupRMON       = 3
	stdGroupsKnown  = 4
	stdGroupsAllSet = 1<<stdGroupsKnown - 1
)

// stdSource reads a netdev's standard statistics. The ethtool-netlink
// source implements it on a host; tests drive the same code through a fake
// generic netlink connection.
type stdSource interface {
	// StandardStats returns errNoStats when the kernel has no ethtool
	// netlink family; parts the driver does not support are left nil.
	StandardStats(ctx context.Context, netdev string, req stdRequest) (*stdStats, error)
}

// stdStats is one netdev's standard statistics as the kernel returned them.
// Only what the driver filled in is present: the kernel omits counters a
// driver leaves unset, and a part the driver lacks (EOPNOTSUPP) is nil.
type stdStats struct {
	// Groups maps an ETHTOOL_STATS_* group id to its counters by the
	// group's ETHTOOL_A_STATS_<GROUP>_* attribute id.
	Groups map[uint32]map[uint16]uint64
	// Hist holds the RMON frame-size ranges (rx and tx).
	Hist []rmonBucket
	// Pause maps ETHTOOL_A_PAUSE_STAT_* ids to values.
	Pause map[uint16]uint64
	// FEC maps ETHTOOL_A_FEC_STAT_* ids to [total, lane0, lane1, ...] (or
	// just [total] when the driver has no per-lane counts).
	FEC map[uint16][]uint64
}

// rmonBucket is one RMON histogram range: frames of Low..High bytes
// (inclusive) received or sent.
type rmonBucket struct {
	TX        bool
	Low, High uint32
	Value     uint64
}

func (s *stdStats) empty() bool {
	if s == nil {
		return true
	}
	for _, g := range s.Groups {
		if len(g) > 0 {
			return false
		}
	}
	return len(s.Hist) == 0 && len(s.Pause) == 0 && len(s.FEC) == 0
}

// decodeStatsReply decodes the attributes of an ETHTOOL_MSG_STATS_GET_REPLY
// into st. Unknown attributes, groups and stats (newer kernels) are skipped.
func decodeStatsReply(b []byte, st *stdStats) error {
	return decodeNested(b, "stats reply", aStatsGrp, func(g *netlink.AttributeDecoder) error { return decodeStatsGroup(g, st) })
}

// decodeNested runs fn on every nested attribute of type typ among a
// reply's top-level attributes; the others (the header, attributes of newer
// kernels) are skipped. what names the reply in errors.
func decodeNested(b []byte, what string, typ uint16, fn func(*netlink.AttributeDecoder) error) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for ad.Next() {
		if ad.Type() == typ {
			ad.Nested(fn)
		}
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func decodeStatsGroup(ad *netlink.AttributeDecoder, st *stdStats) error {
	id, haveID := uint32(0), false
	stats := map[uint16]uint64{}
	var hist []rmonBucket
	for ad.Next() {
		switch ad.Type() {
		case aStatsGrpID:
			id, haveID = ad.Uint32(), true
		case aStatsGrpStat:
			ad.Nested(func(s *netlink.AttributeDecoder) error {
				for s.Next() {
					if _, dup := stats[s.Type()]; !dup {
						stats[s.Type()] = s.Uint64()
					}
				}
				return s.Err()
			})
		case aStatsGrpHistRx, aStatsGrpHistTx:
			tx := ad.Type() == aStatsGrpHistTx
			ad.Nested(func(h *netlink.AttributeDecoder) error {
				bk := rmonBucket{TX: tx}
				var haveLow, haveVal bool
				for h.Next() {
					switch h.Type() {
					case aStatsGrpHistBktLow:
						bk.Low, haveLow = h.Uint32(), true
					case aStatsGrpHistBktHi:
						bk.High = h.Uint32()
					case aStatsGrpHistVal:
						bk.Value, haveVal = h.Uint64(), true
					}
				}
				if haveLow && haveVal {
					hist = append(hist, bk)
				}
				return h.Err()
			})
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if !haveID {
		return fmt.Errorf("stats group without ETHTOOL_A_STATS_GRP_ID")
	}
	if st.Groups == nil {
		st.Groups = map[uint32]map[uint16]uint64{}
	}
	if _, dup := st.Groups[id]; dup {
		return nil // keep the first copy of a group
	}
	st.Groups[id] = stats
	if id == groupRMON {
		seen := map[rmonBucket]bool{}
		for _, bk := range hist {
			key := rmonBucket{TX: bk.TX, Low: bk.Low, High: bk.High}
			if !seen[key] {
				seen[key] = true
				st.Hist = append(st.Hist, bk)
			}
		}
	}
	return nil
}

// decodePauseReply decodes an ETHTOOL_MSG_PAUSE_GET_REPLY's statistics.
func decodePauseReply(b []byte, st *stdStats) error {
	return decodeNested(b, "pause reply", aPauseStats, func(s *netlink.AttributeDecoder) error {
		for s.Next() {
			switch s.Type() {
			case aPauseStatTxFrames, aPauseStatRxFrames:
				if st.Pause == nil {
					st.Pause = map[uint16]uint64{}
				}
				st.Pause[s.Type()] = s.Uint64()
			}
		}
		return s.Err()
	})
}

// decodeFECReply decodes an ETHTOOL_MSG_FEC_GET_REPLY's statistics. Each
// counter is a u64 array: the port total, then one value per lane when the
// driver counts per lane. An empty array means the driver has no such
// counter.
func decodeFECReply(b []byte, st *stdStats) error {
	return decodeNested(b, "FEC reply", aFECStats, func(s *netlink.AttributeDecoder) error {
		for s.Next() {
			switch s.Type() {
			case aFECStatCorrected, aFECStatUncorr, aFECStatCorrBits:
				raw := s.Bytes()
				if len(raw)%8 != 0 {
					return fmt.Errorf("FEC stat %d: %d bytes, not a u64 array", s.Type(), len(raw))
				}
				if len(raw) == 0 {
					continue
				}
				vals := make([]uint64, len(raw)/8)
				for i := range vals {
					vals[i] = binary.NativeEndian.Uint64(raw[i*8:])
				}
				if st.FEC == nil {
					st.FEC = map[uint16][]uint64{}
				}
				st.FEC[s.Type()] = vals
			}
		}
		return s.Err()
	})
}

// stdRequest says which parts of the standard statistics to read.
type stdRequest struct {
	Groups uint32 // bit mask of ETHTOOL_STATS_* groups
	Pause  bool
	FEC    bool
}

func (r stdRequest) none() bool { return r.Groups == 0 && !r.Pause && !r.FEC }

// stdRequestFor reads only what the allowlist lets through.
func stdRequestFor(w *sdk.Writer) stdRequest {
	var r stdRequest
	for _, c := range stdCounters {
		if w.Enabled(c.desc) {
			r.Groups |= 1 << c.group
		}
	}
	if w.Enabled(descRMONHist) {
		r.Groups |= 1 << groupRMON
	}
	r.Pause = w.Enabled(descPauseFrames)
	r.FEC = w.AnyEnabled(fecDescs...)
	return r
}

// emitStandard writes one netdev's standard statistics: only counters the
// kernel returned get a series.
func emitStandard(w *sdk.Writer, netdev string, st *stdStats) {
	if st == nil {
		return
	}
	for _, c := range stdCounters {
		if v, ok := st.Groups[c.group][c.id]; ok {
			w.Counter(c.desc, float64(v), netdev)
		}
	}
	for _, bk := range st.Hist {
		dir := "rx"
		if bk.TX {
			dir = "tx"
		}
		w.Counter(descRMONHist, float64(bk.Value), netdev, dir, strconv.FormatUint(uint64(bk.Low), 10), strconv.FormatUint(uint64(bk.High), 10))
	}
	if v, ok := st.Pause[aPauseStatRxFrames]; ok {
		w.Counter(descPauseFrames, float64(v), netdev, "rx")
	}
	if v, ok := st.Pause[aPauseStatTxFrames]; ok {
		w.Counter(descPauseFrames, float64(v), netdev, "tx")
	}
	for _, f := range fecFamilies {
		vals := st.FEC[f.id]
		if len(vals) == 0 {
			continue
		}
		w.Counter(f.total, float64(vals[0]), netdev)
		for lane, v := range vals[1:] {
			w.Counter(f.lane, float64(v), netdev, strconv.Itoa(lane))
		}
	}
}

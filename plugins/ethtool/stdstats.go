package main

import (
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
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return fmt.Errorf("stats reply: %w", err)
	}
	for ad.Next() {
		if ad.Type() != aStatsGrp {
			continue
		}
		ad.Nested(func(g *netlink.AttributeDecoder) error { return decodeStatsGroup(g, st) })
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("stats reply: %w", err)
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
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return fmt.Errorf("pause reply: %w", err)
	}
	for ad.Next() {
		if ad.Type() != aPauseStats {
			continue
		}
		ad.Nested(func(s *netlink.AttributeDecoder) error {
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
	if err := ad.Err(); err != nil {
		return fmt.Errorf("pause reply: %w", err)
	}
	return nil
}

// decodeFECReply decodes an ETHTOOL_MSG_FEC_GET_REPLY's statistics. Each
// counter is a u64 array: the port total, then one value per lane when the
// driver counts per lane. An empty array means the driver has no such
// counter.
func decodeFECReply(b []byte, st *stdStats) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return fmt.Errorf("FEC reply: %w", err)
	}
	for ad.Next() {
		if ad.Type() != aFECStats {
			continue
		}
		ad.Nested(func(s *netlink.AttributeDecoder) error {
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
	if err := ad.Err(); err != nil {
		return fmt.Errorf("FEC reply: %w", err)
	}
	return nil
}

// stdCounter maps one counter of a standard statistics group to a family.
type stdCounter struct {
	group uint32
	id    uint16
	desc  *sdk.Desc
}

func stdDesc(name, ieee, help string) *sdk.Desc {
	return sdk.NewDesc(name, sdk.Counter, help+" (kernel name "+ieee+").", "netdev")
}

// stdCounters lists every counter of the eth-phy, eth-mac, eth-ctrl and rmon
// groups with the kernel's attribute id. Names are the IEEE 802.3 / RFC 2819
// object names in snake case, prefixed with the group.
var stdCounters = []stdCounter{
	{groupEthPhy, 0, stdDesc("ethtool_eth_phy_symbol_error_during_carrier_total", "SymbolErrorDuringCarrier", "IEEE 802.3 30.3.2.1.5: symbol errors while a carrier was present")},

	{groupEthMAC, 0, stdDesc("ethtool_eth_mac_frames_transmitted_ok_total", "FramesTransmittedOK", "IEEE 802.3 30.3.1.1.2: frames transmitted")},
	{groupEthMAC, 1, stdDesc("ethtool_eth_mac_single_collision_frames_total", "SingleCollisionFrames", "IEEE 802.3 30.3.1.1.3: frames transmitted after exactly one collision")},
	{groupEthMAC, 2, stdDesc("ethtool_eth_mac_multiple_collision_frames_total", "MultipleCollisionFrames", "IEEE 802.3 30.3.1.1.4: frames transmitted after more than one collision")},
	{groupEthMAC, 3, stdDesc("ethtool_eth_mac_frames_received_ok_total", "FramesReceivedOK", "IEEE 802.3 30.3.1.1.5: frames received")},
	{groupEthMAC, 4, stdDesc("ethtool_eth_mac_frame_check_sequence_errors_total", "FrameCheckSequenceErrors", "IEEE 802.3 30.3.1.1.6: received frames with a bad FCS (CRC)")},
	{groupEthMAC, 5, stdDesc("ethtool_eth_mac_alignment_errors_total", "AlignmentErrors", "IEEE 802.3 30.3.1.1.7: received frames that are not a whole number of octets and fail the FCS")},
	{groupEthMAC, 6, stdDesc("ethtool_eth_mac_octets_transmitted_ok_total", "OctetsTransmittedOK", "IEEE 802.3 30.3.1.1.8: octets (bytes) of transmitted frames")},
	{groupEthMAC, 7, stdDesc("ethtool_eth_mac_frames_with_deferred_xmissions_total", "FramesWithDeferredXmissions", "IEEE 802.3 30.3.1.1.9: frames whose first transmission was deferred (medium busy)")},
	{groupEthMAC, 8, stdDesc("ethtool_eth_mac_late_collisions_total", "LateCollisions", "IEEE 802.3 30.3.1.1.10: collisions detected later than one slot time")},
	{groupEthMAC, 9, stdDesc("ethtool_eth_mac_frames_aborted_due_to_xs_colls_total", "FramesAbortedDueToXSColls", "IEEE 802.3 30.3.1.1.11: frames not transmitted because of excessive collisions")},
	{groupEthMAC, 10, stdDesc("ethtool_eth_mac_frames_lost_due_to_int_mac_xmit_error_total", "FramesLostDueToIntMACXmitError", "IEEE 802.3 30.3.1.1.12: frames lost to an internal MAC transmit error")},
	{groupEthMAC, 11, stdDesc("ethtool_eth_mac_carrier_sense_errors_total", "CarrierSenseErrors", "IEEE 802.3 30.3.1.1.13: transmissions during which carrier sense was lost")},
	{groupEthMAC, 12, stdDesc("ethtool_eth_mac_octets_received_ok_total", "OctetsReceivedOK", "IEEE 802.3 30.3.1.1.14: octets (bytes) of received frames")},
	{groupEthMAC, 13, stdDesc("ethtool_eth_mac_frames_lost_due_to_int_mac_rcv_error_total", "FramesLostDueToIntMACRcvError", "IEEE 802.3 30.3.1.1.15: frames lost to an internal MAC receive error")},
	{groupEthMAC, 14, stdDesc("ethtool_eth_mac_multicast_frames_xmitted_ok_total", "MulticastFramesXmittedOK", "IEEE 802.3 30.3.1.1.18: multicast frames transmitted")},
	{groupEthMAC, 15, stdDesc("ethtool_eth_mac_broadcast_frames_xmitted_ok_total", "BroadcastFramesXmittedOK", "IEEE 802.3 30.3.1.1.19: broadcast frames transmitted")},
	{groupEthMAC, 16, stdDesc("ethtool_eth_mac_frames_with_excessive_deferral_total", "FramesWithExcessiveDeferral", "IEEE 802.3 30.3.1.1.20: frames deferred for an excessive period")},
	{groupEthMAC, 17, stdDesc("ethtool_eth_mac_multicast_frames_received_ok_total", "MulticastFramesReceivedOK", "IEEE 802.3 30.3.1.1.21: multicast frames received")},
	{groupEthMAC, 18, stdDesc("ethtool_eth_mac_broadcast_frames_received_ok_total", "BroadcastFramesReceivedOK", "IEEE 802.3 30.3.1.1.22: broadcast frames received")},
	{groupEthMAC, 19, stdDesc("ethtool_eth_mac_in_range_length_errors_total", "InRangeLengthErrors", "IEEE 802.3 30.3.1.1.23: received frames whose length field disagrees with their size")},
	{groupEthMAC, 20, stdDesc("ethtool_eth_mac_out_of_range_length_field_total", "OutOfRangeLengthField", "IEEE 802.3 30.3.1.1.24: received frames with a length field above the maximum")},
	{groupEthMAC, 21, stdDesc("ethtool_eth_mac_frame_too_long_errors_total", "FrameTooLongErrors", "IEEE 802.3 30.3.1.1.25: received frames longer than the maximum size")},

	{groupEthCtrl, 0, stdDesc("ethtool_eth_ctrl_mac_control_frames_transmitted_total", "MACControlFramesTransmitted", "IEEE 802.3 30.3.3.3: MAC control frames (e.g. pause) transmitted")},
	{groupEthCtrl, 1, stdDesc("ethtool_eth_ctrl_mac_control_frames_received_total", "MACControlFramesReceived", "IEEE 802.3 30.3.3.4: MAC control frames (e.g. pause) received")},
	{groupEthCtrl, 2, stdDesc("ethtool_eth_ctrl_unsupported_opcodes_received_total", "UnsupportedOpcodesReceived", "IEEE 802.3 30.3.3.5: MAC control frames with an unsupported opcode received")},

	{groupRMON, 0, stdDesc("ethtool_rmon_undersize_pkts_total", "etherStatsUndersizePkts", "RFC 2819: well-formed received frames shorter than 64 bytes")},
	{groupRMON, 1, stdDesc("ethtool_rmon_oversize_pkts_total", "etherStatsOversizePkts", "RFC 2819: well-formed received frames longer than the maximum size")},
	{groupRMON, 2, stdDesc("ethtool_rmon_fragments_total", "etherStatsFragments", "RFC 2819: received frames shorter than 64 bytes with a bad FCS")},
	{groupRMON, 3, stdDesc("ethtool_rmon_jabbers_total", "etherStatsJabbers", "RFC 2819: received frames longer than the maximum size with a bad FCS")},
}

var (
	descRMONHist = sdk.NewDesc("ethtool_rmon_frames_by_size_total", sdk.Counter,
		"RMON frame-size histogram range as the driver defines it: frames of low..high bytes (inclusive) received (direction=rx) or sent (tx). Ranges are not cumulative.",
		"netdev", "direction", "low", "high")
	descPauseFrames = sdk.NewDesc("ethtool_pause_frames_total", sdk.Counter,
		"IEEE 802.3x (global) pause frames: rx = received from the link partner, tx = sent to it (ETHTOOL_A_PAUSE_STAT_{RX,TX}_FRAMES).",
		"netdev", "direction")
	descFECCorrected = sdk.NewDesc("ethtool_fec_corrected_blocks_total", sdk.Counter,
		"IEEE 802.3 30.5.1.1.17 aFECCorrectedBlocks: received FEC blocks with errors the FEC corrected, port total.", "netdev")
	descFECUncorr = sdk.NewDesc("ethtool_fec_uncorrectable_blocks_total", sdk.Counter,
		"IEEE 802.3 30.5.1.1.18 aFECUncorrectableBlocks: received FEC blocks the FEC could not correct, port total.", "netdev")
	descFECCorrBits = sdk.NewDesc("ethtool_fec_corrected_bit_errors_total", sdk.Counter,
		"Bit errors corrected by FEC (non-standard, ETHTOOL_A_FEC_STAT_CORR_BITS: individual bits, not blocks), port total.", "netdev")
	descFECLaneCorrected = sdk.NewDesc("ethtool_fec_lane_corrected_blocks_total", sdk.Counter,
		"aFECCorrectedBlocks per PCS lane, for drivers that count per lane.", "netdev", "lane")
	descFECLaneUncorr = sdk.NewDesc("ethtool_fec_lane_uncorrectable_blocks_total", sdk.Counter,
		"aFECUncorrectableBlocks per PCS lane, for drivers that count per lane.", "netdev", "lane")
	descFECLaneCorrBits = sdk.NewDesc("ethtool_fec_lane_corrected_bit_errors_total", sdk.Counter,
		"Bit errors corrected by FEC per PCS lane, for drivers that count per lane.", "netdev", "lane")

	fecFamilies = []struct {
		id          uint16
		total, lane *sdk.Desc
	}{
		{aFECStatCorrected, descFECCorrected, descFECLaneCorrected},
		{aFECStatUncorr, descFECUncorr, descFECLaneUncorr},
		{aFECStatCorrBits, descFECCorrBits, descFECLaneCorrBits},
	}
	fecDescs = []*sdk.Desc{descFECCorrected, descFECUncorr, descFECCorrBits, descFECLaneCorrected, descFECLaneUncorr, descFECLaneCorrBits}
)

// stdDescs is every family of the standard-statistics source.
func stdDescs() []*sdk.Desc {
	out := make([]*sdk.Desc, 0, len(stdCounters)+2+len(fecDescs))
	for _, c := range stdCounters {
		out = append(out, c.desc)
	}
	out = append(out, descRMONHist, descPauseFrames)
	return append(out, fecDescs...)
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
	r.FEC = anyEnabled(w, fecDescs)
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

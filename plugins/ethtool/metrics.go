package main

import (
	"github.com/plexporter/plexporter/plugins/internal/rdmacompat"
	"github.com/plexporter/plexporter/sdk"
)

// Families compatible with rdma_exporter's ethtool families: same names,
// types and label sets, so its dashboards and alerts keep working. The
// mlx5 statistic name each one is read from is in the help text and in
// README.md; other drivers contribute whichever of these names they print.
var (
	lPFC  = []string{"device", "port", "netdev", "direction", "priority"}
	lPrio = []string{"device", "port", "netdev", "priority"}
	lPort = []string{"device", "port", "netdev"}

	descPFCFrames      = sdk.NewDesc("rdma_roce_pfc_pause_frames_total", sdk.Counter, "PFC pause frames per priority (ethtool {rx,tx}_prio<p>_pause). direction=rx: the peer paused this port; direction=tx: this port paused the peer.", lPFC...)
	descPFCDuration    = sdk.NewDesc("rdma_roce_pfc_pause_duration_total", sdk.Counter, "PFC pause time per priority in microseconds (ethtool {rx,tx}_prio<p>_pause_duration). rate()/1e6 is the paused fraction of time.", lPFC...)
	descPFCTransitions = sdk.NewDesc("rdma_roce_pfc_pause_transitions_total", sdk.Counter, "PFC not-paused to paused transitions per priority (ethtool rx_prio<p>_pause_transition; mlx5 counts receive only).", lPFC...)
	descPFCErrors      = sdk.NewDesc("rdma_roce_pfc_scrape_errors_total", sdk.Counter, "Failed reads of ethtool statistics for the PFC families since the plugin started.")

	descPrioBufDiscard  = sdk.NewDesc("rdma_netdev_prio_buf_discard_total", sdk.Counter, "Packets of a priority dropped because the per-host receive buffer was exhausted (ethtool rx_prio<p>_buf_discard).", lPrio...)
	descPrioCongDiscard = sdk.NewDesc("rdma_netdev_prio_cong_discard_total", sdk.Counter, "Packets of a priority dropped by congestion handling (ethtool rx_prio<p>_cong_discard).", lPrio...)
	descPrioDiscards    = sdk.NewDesc("rdma_netdev_prio_discards_total", sdk.Counter, "Packets of a priority dropped for lack of receive buffer (ethtool rx_prio<p>_discards).", lPrio...)
	descPrioECNMarked   = sdk.NewDesc("rdma_netdev_prio_ecn_marked_total", sdk.Counter, "Packets of a priority ECN-marked by the device because the host side was congested (ethtool rx_prio<p>_marked).", lPrio...)
	descDevOOB          = sdk.NewDesc("rdma_netdev_dev_out_of_buffer_total", sdk.Counter, "Drops on device-internal receive queues lacking buffers (ethtool dev_internal_queue_oob, formerly dev_out_of_buffer). Not the RDMA QP counter out_of_buffer.", lPort...)
	descRxOOB           = sdk.NewDesc("rdma_netdev_rx_out_of_buffer_total", sdk.Counter, "Packets dropped because a receive queue had no posted buffer (ethtool rx_out_of_buffer). Not the RDMA QP counter out_of_buffer.", lPort...)
	descRxDiscardsPhy   = sdk.NewDesc("rdma_netdev_rx_discards_phy_total", sdk.Counter, "Packets the physical port dropped for lack of buffer (ethtool rx_discards_phy).", lPort...)

	descPCIeStalledPct  = sdk.NewDesc("rdma_pcie_outbound_stalled_percent", sdk.Gauge, "Percent (0-100) of the last second that outbound PCIe reads (op=rd) or writes (op=wr) waited for credits (ethtool outbound_pci_stalled_{rd,wr}); sampled at scrape time.", "device", "port", "netdev", "op")
	descPCIeStalledSecs = sdk.NewDesc("rdma_pcie_outbound_stalled_seconds_total", sdk.Counter, "Seconds in which the outbound PCIe stall exceeded 30 percent (ethtool outbound_pci_stalled_{rd,wr}_events).", "device", "port", "netdev", "op")
	descPCIeOverflow    = sdk.NewDesc("rdma_pcie_outbound_buffer_overflow_total", sdk.Counter, "Packets dropped because the PCIe outbound buffer overflowed (ethtool outbound_pci_buffer_overflow).", lPort...)
	descPCIeSignal      = sdk.NewDesc("rdma_pcie_signal_integrity_total", sdk.Counter, "PCIe physical-layer errors (ethtool {rx,tx}_pci_signal_integrity).", "device", "port", "netdev", "direction")

	descPhyCorrected = sdk.NewDesc("rdma_phy_rx_corrected_bits_total", sdk.Counter, "Bits corrected by FEC at the physical port (ethtool rx_corrected_bits_phy).", lPort...)
	descPhyPCSSymErr = sdk.NewDesc("rdma_phy_rx_pcs_symbol_err_total", sdk.Counter, "PCS symbol errors FEC could not correct (ethtool rx_pcs_symbol_err_phy).", lPort...)
	descPhyRxBits    = sdk.NewDesc("rdma_phy_rx_bits_total", sdk.Counter, "Bits received at the physical port, the denominator of a bit error ratio (ethtool rx_bits_phy).", lPort...)
	descPhyErrLane   = sdk.NewDesc("rdma_phy_rx_err_lane_total", sdk.Counter, "Corrected bits per SerDes lane (ethtool rx_err_lane_<l>_phy).", "device", "port", "netdev", "lane")
	descPhyCRC       = sdk.NewDesc("rdma_phy_rx_crc_errors_total", sdk.Counter, "Frames with a bad FCS at the physical port (ethtool rx_crc_errors_phy).", lPort...)
	descPhyLinkDown  = sdk.NewDesc("rdma_phy_link_down_events_total", sdk.Counter, "Physical link-down transitions (ethtool link_down_events_phy).", lPort...)

	descGlobalPauseFrames = sdk.NewDesc("rdma_netdev_global_pause_frames_total", sdk.Counter, "IEEE 802.3x (link-level) pause frames (ethtool {rx,tx}_global_pause); present only when global pause is on.", "device", "port", "netdev", "direction")
	descGlobalPauseDur    = sdk.NewDesc("rdma_netdev_global_pause_duration_total", sdk.Counter, "IEEE 802.3x pause time in microseconds (ethtool {rx,tx}_global_pause_duration).", "device", "port", "netdev", "direction")
	descGlobalPauseTrans  = sdk.NewDesc("rdma_netdev_global_pause_transitions_total", sdk.Counter, "IEEE 802.3x not-paused to paused transitions (ethtool rx_global_pause_transition; receive only).", lPort...)
	descPauseStorm        = sdk.NewDesc("rdma_netdev_pause_storm_events_total", sdk.Counter, "Pause-storm watchdog events (ethtool tx_pause_storm_{warning,error}_events); severity=error means the device stopped honouring pause.", "device", "port", "netdev", "severity")
	descVPortBytes        = sdk.NewDesc("rdma_netdev_vport_rdma_bytes_total", sdk.Counter, "RDMA bytes of this function's vport (ethtool {rx,tx}_vport_rdma_{unicast,multicast}_bytes).", "device", "port", "netdev", "direction", "traffic")
	descVPortPackets      = sdk.NewDesc("rdma_netdev_vport_rdma_packets_total", sdk.Counter, "RDMA packets of this function's vport (ethtool {rx,tx}_vport_rdma_{unicast,multicast}_packets).", "device", "port", "netdev", "direction", "traffic")
	// rdma_exporter's success gauge, shared with the rdma plugin
	// (collector="ethtool" here).
	descCollectorSuccess = rdmacompat.CollectorSuccess
	descNetdevErrors     = sdk.NewDesc("rdma_netdev_scrape_errors_total", sdk.Counter, "Failed reads of ethtool statistics for the netdev hardware families since the plugin started.")

	pfcDescs = []*sdk.Desc{descPFCFrames, descPFCDuration, descPFCTransitions}
	hwDescs  = []*sdk.Desc{
		descPrioBufDiscard, descPrioCongDiscard, descPrioDiscards, descPrioECNMarked, descDevOOB, descRxOOB, descRxDiscardsPhy,
		descPCIeStalledPct, descPCIeStalledSecs, descPCIeOverflow, descPCIeSignal,
		descPhyCorrected, descPhyPCSSymErr, descPhyRxBits, descPhyErrLane, descPhyCRC, descPhyLinkDown,
		descGlobalPauseFrames, descGlobalPauseDur, descGlobalPauseTrans, descPauseStorm, descVPortBytes, descVPortPackets,
	}
)

// Driver statistics (driver_stats: true).
var (
	descDriverStat      = sdk.NewDesc("ethtool_driver_stat_total", sdk.Counter, "A driver statistic as `ethtool -S` prints it (driver_stats: true). Most are counters; a few driver gauges are exported here too, see README.", "netdev", "stat")
	descDriverQueueStat = sdk.NewDesc("ethtool_driver_queue_stat_total", sdk.Counter, "A per-queue (or per-channel) driver statistic; stat is the name without its queue index, queue the index.", "netdev", "queue", "stat")
	descDriverCapped    = sdk.NewDesc("ethtool_driver_stats_capped_total", sdk.Counter, "Scrapes in which a netdev's driver statistics hit max_driver_stats_per_netdev and the rest were dropped.", "netdev")
	descDriverDropped   = sdk.NewDesc("ethtool_driver_stats_dropped", sdk.Gauge, "Driver statistics dropped by max_driver_stats_per_netdev in the last scrape.", "netdev")

	driverDescs = []*sdk.Desc{descDriverStat, descDriverQueueStat, descDriverCapped, descDriverDropped}
)

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

// descCollectionErrors is the plugin's count of partial failures, one per
// error it reports to the host, by the collector that failed.
var descCollectionErrors = sdk.NewDesc("ethtool_collection_errors_total", sdk.Counter,
	"Failed reads since the plugin started, by collector: rdma_sysfs (listing class/infiniband), rdma_stats (a driver statistics read for the rdma_* families), netdevs (listing class/net), driver_stats (a driver statistics read for the ethtool_driver_* families), standard_stats (an ethtool netlink read). Each is also reported to the host as a partial error.",
	"collector")

// The collectors of ethtool_collection_errors_total.
const (
	collectorRDMASysfs     = "rdma_sysfs"
	collectorRDMAStats     = "rdma_stats"
	collectorNetdevs       = "netdevs"
	collectorDriverStats   = "driver_stats"
	collectorStandardStats = "standard_stats"
)

// catalogue is every family the plugin writes, as Info returns it.
var catalogue = func() []*sdk.Desc {
	c := append([]*sdk.Desc{}, pfcDescs...)
	c = append(c, descPFCErrors)
	c = append(c, hwDescs...)
	c = append(c, descNetdevErrors, descCollectorSuccess)
	c = append(c, driverDescs...)
	c = append(c, ionicDescs...)
	for _, s := range stdCounters {
		c = append(c, s.desc)
	}
	c = append(c, descRMONHist, descPauseFrames)
	c = append(c, fecDescs...)
	return append(c, descCollectionErrors)
}()

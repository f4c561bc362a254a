package main

import (
	"regexp"
	"slices"

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
	descNetdevErrors      = sdk.NewDesc("rdma_netdev_scrape_errors_total", sdk.Counter, "Failed reads of ethtool statistics for the netdev hardware families since the plugin started.")

	pfcDescs = []*sdk.Desc{descPFCFrames, descPFCDuration, descPFCTransitions}
	hwDescs  = []*sdk.Desc{
		descPrioBufDiscard, descPrioCongDiscard, descPrioDiscards, descPrioECNMarked, descDevOOB, descRxOOB, descRxDiscardsPhy,
		descPCIeStalledPct, descPCIeStalledSecs, descPCIeOverflow, descPCIeSignal,
		descPhyCorrected, descPhyPCSSymErr, descPhyRxBits, descPhyErrLane, descPhyCRC, descPhyLinkDown,
		descGlobalPauseFrames, descGlobalPauseDur, descGlobalPauseTrans, descPauseStorm, descVPortBytes, descVPortPackets,
	}
)

// The statistic-name table: one place for every name the parity families read.
var (
	rePFC          = regexp.MustCompile(`^(rx|tx)_prio([0-7])_pause(?:_(duration|transition))?$`)
	rePrio         = regexp.MustCompile(`^rx_prio([0-7])_(buf_discard|cong_discard|discards|marked)$`)
	rePCIeStallPct = regexp.MustCompile(`^outbound_pci_stalled_(rd|wr)$`)
	rePCIeStallEv  = regexp.MustCompile(`^outbound_pci_stalled_(rd|wr)_events$`)
	rePCIeSignal   = regexp.MustCompile(`^(rx|tx)_pci_signal_integrity$`)
	reLane         = regexp.MustCompile(`^rx_err_lane_([0-9]+)_phy$`)
	reGlobalPause  = regexp.MustCompile(`^(rx|tx)_global_pause(_duration)?$`)
	rePauseStorm   = regexp.MustCompile(`^tx_pause_storm_(warning|error)_events$`)
	reVPortRDMA    = regexp.MustCompile(`^(rx|tx)_vport_rdma_(unicast|multicast)_(bytes|packets)$`)

	prioKinds = map[string]*sdk.Desc{
		"buf_discard": descPrioBufDiscard, "cong_discard": descPrioCongDiscard,
		"discards": descPrioDiscards, "marked": descPrioECNMarked,
	}
	plainHW = map[string]*sdk.Desc{
		"dev_out_of_buffer":            descDevOOB,
		"dev_internal_queue_oob":       descDevOOB, // upstream name of dev_out_of_buffer
		"rx_out_of_buffer":             descRxOOB,
		"rx_discards_phy":              descRxDiscardsPhy,
		"outbound_pci_buffer_overflow": descPCIeOverflow,
		"rx_corrected_bits_phy":        descPhyCorrected,
		"rx_pcs_symbol_err_phy":        descPhyPCSSymErr,
		"rx_bits_phy":                  descPhyRxBits,
		"rx_crc_errors_phy":            descPhyCRC,
		"link_down_events_phy":         descPhyLinkDown,
	}
)

// firstValues maps each name to its first value (some drivers repeat names)
// and returns the names sorted, so output order does not depend on the driver.
func firstValues(st *driverStats) (map[string]uint64, []string) {
	m := make(map[string]uint64, len(st.Names))
	names := make([]string, 0, len(st.Names))
	for i, n := range st.Names {
		if _, dup := m[n]; dup || i >= len(st.Values) {
			continue
		}
		m[n] = st.Values[i]
		names = append(names, n)
	}
	slices.Sort(names)
	return m, names
}

func emitPFC(w *sdk.Writer, p rdmaPort, vals map[string]uint64, names []string) {
	for _, n := range names {
		m := rePFC.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		d := descPFCFrames
		switch m[3] {
		case "duration":
			d = descPFCDuration
		case "transition":
			d = descPFCTransitions
		}
		w.Counter(d, float64(vals[n]), p.Device, p.Port, p.NetDev, m[1], m[2])
	}
}

func emitHW(w *sdk.Writer, p rdmaPort, vals map[string]uint64, names []string, noVPort bool) {
	lv := []string{p.Device, p.Port, p.NetDev}
	with := func(extra ...string) []string { return append(slices.Clip(lv), extra...) }
	devOOBDone := false
	for _, n := range names {
		v := float64(vals[n])
		if m := rePrio.FindStringSubmatch(n); m != nil {
			w.Counter(prioKinds[m[2]], v, with(m[1])...)
			continue
		}
		if m := rePCIeStallPct.FindStringSubmatch(n); m != nil {
			w.Gauge(descPCIeStalledPct, v, with(m[1])...)
			continue
		}
		if m := rePCIeStallEv.FindStringSubmatch(n); m != nil {
			w.Counter(descPCIeStalledSecs, v, with(m[1])...)
			continue
		}
		if m := rePCIeSignal.FindStringSubmatch(n); m != nil {
			w.Counter(descPCIeSignal, v, with(m[1])...)
			continue
		}
		if m := reLane.FindStringSubmatch(n); m != nil {
			w.Counter(descPhyErrLane, v, with(m[1])...)
			continue
		}
		if m := reGlobalPause.FindStringSubmatch(n); m != nil {
			d := descGlobalPauseFrames
			if m[2] != "" {
				d = descGlobalPauseDur
			}
			w.Counter(d, v, with(m[1])...)
			continue
		}
		if n == "rx_global_pause_transition" {
			w.Counter(descGlobalPauseTrans, v, lv...)
			continue
		}
		if m := rePauseStorm.FindStringSubmatch(n); m != nil {
			w.Counter(descPauseStorm, v, with(m[1])...)
			continue
		}
		if m := reVPortRDMA.FindStringSubmatch(n); m != nil {
			if noVPort {
				continue
			}
			d := descVPortBytes
			if m[3] == "packets" {
				d = descVPortPackets
			}
			w.Counter(d, v, with(m[1], m[2])...)
			continue
		}
		if d, ok := plainHW[n]; ok {
			if d == descDevOOB {
				// Both spellings map to one series; the pre-merge name wins
				// if a driver ever prints both.
				if devOOBDone {
					continue
				}
				devOOBDone = true
				if _, old := vals["dev_out_of_buffer"]; old {
					v = float64(vals["dev_out_of_buffer"])
				}
			}
			w.Counter(d, v, lv...)
		}
	}
}

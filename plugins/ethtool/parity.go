package main

import (
	"regexp"
	"slices"

	"github.com/plexporter/plexporter/sdk"
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

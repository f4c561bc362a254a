package main

import (
	"regexp"
	"strings"
	"sync"

	"github.com/plexporter/plexporter/sdk"
)

// AMD Pensando ionic netdevs (drivers/net/ethernet/pensando/ionic,
// ionic_stats.c) print three blocks in `ethtool -S`: the LIF's software
// totals (tx_packets, hw_rx_dropped, xdp_drop, ...), the port's MAC
// counters from firmware (frames_*, octets_*, per-priority frames and PFC
// pause time, rx_bits_phy), then tx_<q>_<stat> and rx_<q>_<stat> for every
// queue. They are exported as ionic_lif_*, ionic_lif_queue_* and
// ionic_port_* families, one family per statistic with the queue or
// priority index moved into a label. The names are read from the driver's
// string table, never listed: the set changes between kernel versions.
//
// They are written for the netdevs of RDMA Ethernet ports whose driver
// (ETHTOOL_GDRVINFO) is ionic, from the table the rdma_* families read, so
// enabling them costs no extra ioctl.

const ionicDriver = "ionic"

// The family shapes. A statistic matches the first rule that fits.
var ionicRules = []struct {
	re *regexp.Regexp
	// family returns the family name, the index label's value ("" for
	// none) and the statistic with its index as a placeholder, for the help.
	family func(m []string) (name, index, generic string)
	label  string // the index label's name
}{
	// Per queue: tx_0_pkts, rx_3_xdp_redirect.
	{regexp.MustCompile(`^(tx|rx)_([0-9]+)_(.+)$`), func(m []string) (string, string, string) {
		return "ionic_lif_queue_" + m[1] + "_" + m[3] + "_total", m[2], m[1] + "_<queue>_" + m[3]
	}, "queue"},
	// Per priority: frames_tx_pri_3.
	{regexp.MustCompile(`^frames_(tx|rx)_pri_([0-7])$`), func(m []string) (string, string, string) {
		return "ionic_port_frames_" + m[1] + "_pri_total", m[2], "frames_" + m[1] + "_pri_<priority>"
	}, "priority"},
	// PFC pause time per priority in 1 µs units: rx_pripause_3_1us_count.
	{regexp.MustCompile(`^(tx|rx)_pripause_([0-7])_1us_count$`), func(m []string) (string, string, string) {
		return "ionic_port_" + m[1] + "_pripause_1us_total", m[2], m[1] + "_pripause_<priority>_1us_count (microseconds)"
	}, "priority"},
	// Link-level pause time: rx_pause_1us_count.
	{regexp.MustCompile(`^(tx|rx)_pause_1us_count$`), func(m []string) (string, string, string) {
		return "ionic_port_" + m[1] + "_pause_1us_total", "", m[0] + " (microseconds)"
	}, ""},
	// The rest of the port block: frames_*, octets_*, rx_bits_phy.
	{regexp.MustCompile(`^(frames_.+|octets_.+|rx_bits_phy)$`), func(m []string) (string, string, string) {
		return "ionic_port_" + m[1] + "_total", "", m[0]
	}, ""},
	// Everything else is a LIF total (the block the driver grows most).
	{regexp.MustCompile(`^(.+)$`), func(m []string) (string, string, string) { return "ionic_lif_" + m[1] + "_total", "", m[0] }, ""},
}

// ionicFamily maps one ionic statistic to its family, the index label's
// name and value ("" when the family has none), and the statistic's
// generic name (its index as a placeholder).
func ionicFamily(stat string) (family, label, index, generic string) {
	stat = sanitizeStat(stat)
	for _, r := range ionicRules {
		if m := r.re.FindStringSubmatch(stat); m != nil {
			family, index, generic = r.family(m)
			return family, r.label, index, generic
		}
	}
	return "", "", "", "" // unreachable: the last rule matches any name
}

// sanitizeStat keeps a driver's statistic name to [a-z0-9_].
func sanitizeStat(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '_'
	}, s)
}

// ionicDescs are the catalogue's patterns for the families above.
var ionicDescs = []*sdk.Desc{
	sdk.NewDesc("ionic_lif_*_total", sdk.Counter, "An ionic LIF total from the driver's statistics (ethtool -S <stat> as ionic_lif_<stat>_total).", "netdev"),
	sdk.NewDesc("ionic_lif_queue_*_total", sdk.Counter, "A per-queue ionic statistic (ethtool -S {tx,rx}_<queue>_<stat> as ionic_lif_queue_{tx,rx}_<stat>_total{queue}).", "netdev", "queue"),
	sdk.NewDesc("ionic_port_*_total", sdk.Counter, "An ionic port (MAC) counter from firmware (ethtool -S frames_*, octets_*, per-priority frames and PFC pause time, rx_bits_phy).", "netdev"),
}

// ionicDescCache hands out one Desc per family, created on first sight (the
// Writer keys its state by the pointer).
var ionicDescCache = struct {
	sync.Mutex
	m map[string]*sdk.Desc
}{m: map[string]*sdk.Desc{}}

func ionicDesc(family, label, generic string) *sdk.Desc {
	ionicDescCache.Lock()
	defer ionicDescCache.Unlock()
	if d, ok := ionicDescCache.m[family]; ok {
		return d
	}
	labels := []string{"netdev"}
	if label != "" {
		labels = append(labels, label)
	}
	d := sdk.NewDesc(family, sdk.Counter, "ionic driver statistic "+generic+" (ethtool -S).", labels...)
	ionicDescCache.m[family] = d
	return d
}

// ionicWriter writes the ionic families of each ionic netdev once per
// collect, while the allowlist lets them through.
type ionicWriter struct {
	w    *sdk.Writer
	done map[string]bool
}

func newIonicWriter(w *sdk.Writer) *ionicWriter { return &ionicWriter{w: w, done: map[string]bool{}} }

// write writes st's statistics if the netdev's driver is ionic. Repeated
// names keep their first value, as everywhere in this plugin.
func (iw *ionicWriter) write(netdev string, st *driverStats) {
	if st == nil || st.Driver != ionicDriver || iw.done[netdev] {
		return
	}
	iw.done[netdev] = true
	seen := make(map[string]bool, len(st.Names))
	for i, name := range st.Names {
		if i >= len(st.Values) || seen[name] {
			continue
		}
		seen[name] = true
		family, label, index, generic := ionicFamily(name)
		d := ionicDesc(family, label, generic)
		if !iw.w.Enabled(d) {
			continue
		}
		if label == "" {
			iw.w.Counter(d, float64(st.Values[i]), netdev)
		} else {
			iw.w.Counter(d, float64(st.Values[i]), netdev, index)
		}
	}
}

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/plexporter/plexporter/sdk"
)

var (
	descDriverStat      = sdk.NewDesc("ethtool_driver_stat_total", sdk.Counter, "A driver statistic as `ethtool -S` prints it (driver_stats: true). Most are counters; a few driver gauges are exported here too, see README.", "netdev", "stat")
	descDriverQueueStat = sdk.NewDesc("ethtool_driver_queue_stat_total", sdk.Counter, "A per-queue (or per-channel) driver statistic; stat is the name without its queue index, queue the index.", "netdev", "queue", "stat")
	descDriverCapped    = sdk.NewDesc("ethtool_driver_stats_capped_total", sdk.Counter, "Scrapes in which a netdev's driver statistics hit max_driver_stats_per_netdev and the rest were dropped.", "netdev")
	descDriverDropped   = sdk.NewDesc("ethtool_driver_stats_dropped", sdk.Gauge, "Driver statistics dropped by max_driver_stats_per_netdev in the last scrape.", "netdev")
	descScrapeErrors    = sdk.NewDesc("ethtool_scrape_errors_total", sdk.Counter, "Failed reads per source (driver_stats, standard_stats, netdevs) since the plugin started.", "source")

	driverDescs = []*sdk.Desc{descDriverStat, descDriverQueueStat, descDriverCapped, descDriverDropped}
)

// Per-queue name shapes, driver-neutral where the shape is unambiguous.
// The result label `stat` keeps the direction so it lines up with the totals.
var queuePatterns = []struct {
	re *regexp.Regexp
	// build returns (queue, stat) from the submatches.
	build func(m []string) (string, string)
}{
	// virtio_net, veth, ixgbe: rx_queue_0_packets
	{regexp.MustCompile(`^(rx|tx)_queue_([0-9]+)_(.+)$`), func(m []string) (string, string) { return m[2], m[1] + "_" + m[3] }},
	// mlx5: rx0_packets, tx3_xmit_more
	{regexp.MustCompile(`^(rx|tx)([0-9]+)_(.+)$`), func(m []string) (string, string) { return m[2], m[1] + "_" + m[3] }},
	// mlx5 channels: ch0_events
	{regexp.MustCompile(`^ch([0-9]+)_(.+)$`), func(m []string) (string, string) { return m[1], "ch_" + m[2] }},
	// ionic: tx_0_pkts (mlx5's rx_64_bytes_phy histogram is excluded below)
	{regexp.MustCompile(`^(rx|tx)_([0-9]+)_(.+)$`), func(m []string) (string, string) { return m[2], m[1] + "_" + m[3] }},
	// ena: queue_0_tx_cnt
	{regexp.MustCompile(`^queue_([0-9]+)_(.+)$`), func(m []string) (string, string) { return m[1], m[2] }},
	// bnxt: [0]: rx_ucast_packets
	{regexp.MustCompile(`^\[([0-9]+)\]: (.+)$`), func(m []string) (string, string) { return m[1], m[2] }},
	// i40e: tx-0.tx_packets
	{regexp.MustCompile(`^(rx|tx)-([0-9]+)\.(.+)$`), func(m []string) (string, string) { return m[2], m[3] }},
}

// splitQueue returns the queue index and the stat name without it, or
// ok=false for a device-wide statistic.
func splitQueue(name string) (queue, stat string, ok bool) {
	if strings.HasSuffix(name, "_phy") {
		return "", "", false // port (PHY) statistics, e.g. rx_65_to_127_bytes_phy
	}
	for _, p := range queuePatterns {
		if m := p.re.FindStringSubmatch(name); m != nil {
			q, s := p.build(m)
			if len(q) > 5 {
				return "", "", false
			}
			return q, s, true
		}
	}
	return "", "", false
}

// emitDriverStats writes one netdev's driver statistics through the filter
// and the per-netdev cap. It returns how many were dropped by the cap.
func (p *plugin) emitDriverStats(w *sdk.Writer, netdev string, st *driverStats) int {
	seen := make(map[string]bool, len(st.Names))
	written, dropped := 0, 0
	for i, name := range st.Names {
		if i >= len(st.Values) || seen[name] {
			continue
		}
		seen[name] = true
		if p.statInclude != nil && !p.statInclude.MatchString(name) {
			continue
		}
		if p.statExclude != nil && p.statExclude.MatchString(name) {
			continue
		}
		if written >= p.cfg.MaxDriverStatsPerNetdev {
			dropped++
			continue
		}
		written++
		v := float64(st.Values[i])
		if q, s, ok := splitQueue(name); ok {
			w.Counter(descDriverQueueStat, v, netdev, q, s)
		} else {
			w.Counter(descDriverStat, v, netdev, name)
		}
	}
	return dropped
}

// listNetdevs returns the netdevs of class/net selected by the include and
// exclude regexes and, with require_device, only those with a `device`
// link (hardware NICs and VFs; not lo, veth, bridges, bonds, tunnels).
func (p *plugin) listNetdevs() ([]string, error) {
	dir := filepath.Join(p.paths.Sysfs, "class", "net")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no network class at all: no netdevs
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if p.include != nil && !p.include.MatchString(n) {
			continue
		}
		if p.exclude != nil && p.exclude.MatchString(n) {
			continue
		}
		if *p.cfg.RequireDevice {
			if _, err := os.Lstat(filepath.Join(dir, n, "device")); err != nil {
				continue
			}
		}
		out = append(out, n)
	}
	return out, nil
}

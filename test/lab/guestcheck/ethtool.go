package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// checkDriverStats compares the plugin's driver statistics of netdev
// (driver_stats: true in the lab's config) with `ethtool -S`. Statistics
// that change between the two ethtool readings around the scrape (traffic
// counters of a live NIC) are skipped; every stable one must be exported
// with the same value.
func checkDriverStats(l *lab, netdev, driver string) error {
	info, err := run("ethtool", "-i", netdev)
	if err != nil {
		return err
	}
	if !strings.Contains(info, "driver: "+driver+"\n") {
		return fmt.Errorf("ethtool -i %s does not say driver %s:\n%s", netdev, driver, info)
	}
	first, err := ethtoolStats(netdev)
	if err != nil {
		return err
	}
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	second, err := ethtoolStats(netdev)
	if err != nil {
		return err
	}
	var errs []error
	compared, moving := 0, 0
	for _, name := range sortedKeys(first) {
		if first[name] != second[name] {
			moving++
			continue
		}
		got, err := driverStat(e, netdev, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got != first[name] {
			errs = append(errs, fmt.Errorf("%s %s: exported %v, ethtool -S says %v", netdev, name, got, first[name]))
		}
		compared++
	}
	if compared == 0 {
		errs = append(errs, fmt.Errorf("%s: no stable statistic to compare (ethtool -S listed %d)", netdev, len(first)))
	}
	l.note("%s (%s): %d of %d ethtool -S statistics compared, %d moving", netdev, driver, compared, len(first), moving)
	return errors.Join(errs...)
}

// virtio_net's per-queue names; the plugin exports them as
// ethtool_driver_queue_stat_total{queue="0",stat="rx_packets"}.
var queueStat = regexp.MustCompile(`^(rx|tx)_queue_([0-9]+)_(.+)$`)

func driverStat(e exposition, netdev, name string) (float64, error) {
	if m := queueStat.FindStringSubmatch(name); m != nil {
		return e.value("ethtool_driver_queue_stat_total", "netdev", netdev, "queue", m[2], "stat", m[1]+"_"+m[3])
	}
	return e.value("ethtool_driver_stat_total", "netdev", netdev, "stat", name)
}

// ethtoolStats parses `ethtool -S`: "     name: value" lines.
func ethtoolStats(netdev string) (map[string]float64, error) {
	out, err := run("ethtool", "-S", netdev)
	if err != nil {
		return nil, err
	}
	stats := map[string]float64{}
	for _, line := range strings.Split(out, "\n")[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			stats[k] = f
		}
	}
	if len(stats) == 0 {
		return nil, fmt.Errorf("ethtool -S %s printed no statistics:\n%s", netdev, out)
	}
	return stats, nil
}

// checkStandardStats: where ethtool's netlink standard statistics groups
// report something for a NIC, the plugin must export them for it; where
// the driver supports none (virtio_net and e1000e in 6.1 report no eth-mac,
// eth-phy, eth-ctrl or rmon group), there must be none and no error.
func checkStandardStats(l *lab) error {
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	var errs []error
	for _, netdev := range []string{"eth0", "eth1"} {
		out, err := run("ethtool", "-S", netdev, "--all-groups")
		groups := standardGroups(out)
		var exported []string
		for _, p := range []string{"ethtool_eth_", "ethtool_rmon_", "ethtool_pause_", "ethtool_fec_"} {
			exported = append(exported, e.families(p, "netdev", netdev)...)
		}
		l.note("%s: ethtool --all-groups reports %v (err %v); plugin exports %d standard families", netdev, groups, err, len(exported))
		if len(groups) > 0 && len(exported) == 0 {
			errs = append(errs, fmt.Errorf("%s: ethtool reports standard groups %v, the plugin exports none", netdev, groups))
		}
		if len(groups) == 0 && len(exported) > 0 {
			errs = append(errs, fmt.Errorf("%s: ethtool reports no standard group, the plugin exports %v", netdev, exported))
		}
	}
	return errors.Join(errs...)
}

// standardGroups lists the "Standard stats for <dev>" group headers of
// `ethtool -S --all-groups` that have at least one value line.
func standardGroups(out string) []string {
	var groups []string
	current, counted := "", false
	flush := func() {
		if current != "" && counted {
			groups = append(groups, current)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "Standard stats for"):
			flush()
			current, counted = t, false
		case current != "" && strings.Contains(t, ": "):
			counted = true
		}
	}
	flush()
	return groups
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

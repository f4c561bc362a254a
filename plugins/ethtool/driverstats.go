package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/plexporter/plexporter/sdk"
)

// driverStats is one netdev's `ethtool -S` table: names and values in the
// driver's order. Names may repeat for some drivers; consumers keep the first.
type driverStats struct {
	Driver string
	Names  []string
	Values []uint64
}

// statsSource reads driver statistics of a netdev. The ioctl source
// (ioctl_linux.go) implements it on a host; tests feed fixtures through the
// same interface.
type statsSource interface {
	DriverStats(ctx context.Context, netdev string) (*driverStats, error)
}

// errNoStats means the netdev has no driver statistics (EOPNOTSUPP, or a
// count of zero, as for bridges): that is "no series", not a failure.
var errNoStats = errors.New("no driver statistics")

// ethGStringLen is ETH_GSTRING_LEN: every name in a string table is a
// NUL-padded 32-byte slot.
const ethGStringLen = 32

// decodeGStrings decodes a struct ethtool_gstrings buffer (u32 cmd, u32
// string_set, u32 len, len × 32-byte names) as the kernel fills it.
func decodeGStrings(buf []byte) ([]string, error) {
	if len(buf) < 12 {
		return nil, fmt.Errorf("string table: %d bytes, shorter than its 12-byte header", len(buf))
	}
	n := binary.NativeEndian.Uint32(buf[8:12])
	if uint64(n)*ethGStringLen > uint64(len(buf)-12) {
		return nil, fmt.Errorf("string table: header says %d names but the buffer holds %d", n, (len(buf)-12)/ethGStringLen)
	}
	names := make([]string, n)
	for i := range names {
		slot := buf[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		end := 0
		for end < len(slot) && slot[end] != 0 {
			end++
		}
		names[i] = string(slot[:end])
	}
	return names, nil
}

// decodeGStats decodes a struct ethtool_stats buffer (u32 cmd, u32 n_stats,
// n_stats × u64).
func decodeGStats(buf []byte) ([]uint64, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("stats: %d bytes, shorter than the 8-byte header", len(buf))
	}
	n := binary.NativeEndian.Uint32(buf[4:8])
	if uint64(n)*8 > uint64(len(buf)-8) {
		return nil, fmt.Errorf("stats: header says %d values but the buffer holds %d", n, (len(buf)-8)/8)
	}
	vals := make([]uint64, n)
	for i := range vals {
		vals[i] = binary.NativeEndian.Uint64(buf[8+i*8:])
	}
	return vals, nil
}

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

// queueSplits memoizes splitQueue, which runs its regexps on every
// statistic of every netdev on every scrape otherwise (a fifth of the
// plugin's CPU with driver_stats on). Names repeat across netdevs and
// scrapes; the memo is forgotten when it holds maxQueueSplits names, so a
// driver inventing names cannot grow it without end. Not safe for
// concurrent use (Collect holds the plugin's lock).
type queueSplits map[string]queueSplit

type queueSplit struct {
	queue, stat string
	ok          bool
}

const maxQueueSplits = 8192

func (m queueSplits) split(name string) (queue, stat string, ok bool) {
	if s, hit := m[name]; hit {
		return s.queue, s.stat, s.ok
	}
	if len(m) >= maxQueueSplits {
		clear(m)
	}
	queue, stat, ok = splitQueue(name)
	m[name] = queueSplit{queue, stat, ok}
	return queue, stat, ok
}

// emitDriverStats writes one netdev's driver statistics through the filter
// and the per-netdev cap of c. It returns how many were dropped by the cap.
func emitDriverStats(w *sdk.Writer, c *config, splits queueSplits, netdev string, st *driverStats) int {
	seen := make(map[string]bool, len(st.Names))
	written, dropped := 0, 0
	for i, name := range st.Names {
		if i >= len(st.Values) || seen[name] {
			continue
		}
		seen[name] = true
		if c.statInclude != nil && !c.statInclude.MatchString(name) {
			continue
		}
		if c.statExclude != nil && c.statExclude.MatchString(name) {
			continue
		}
		if written >= c.MaxDriverStatsPerNetdev {
			dropped++
			continue
		}
		written++
		v := float64(st.Values[i])
		if q, s, ok := splits.split(name); ok {
			w.Counter(descDriverQueueStat, v, netdev, q, s)
		} else {
			w.Counter(descDriverStat, v, netdev, name)
		}
	}
	return dropped
}

package main

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// The TCP retransmission programs' variants.
var tcpVariants = map[string]variant{
	attachTPBTF: {attach: attachTPBTF, hooks: []hook{
		{program: "tpbtf_tcp_retransmit_skb", event: "tcp_retransmit_skb", group: "tcp"},
	}},
	attachTracepoint: {attach: attachTracepoint, hooks: []hook{
		{program: "tp_tcp_retransmit_skb", event: "tcp_retransmit_skb", group: "tcp"},
	}},
}

// Destination classes, bits of the filter maps' values (CLASS_* in
// tcp.bpf.c).
const (
	classNFS         uint32 = 1
	classObjectStore uint32 = 2
)

// Indexes of tcp_counters (enum tcp_counter).
const (
	tcpInserted     = 0
	tcpInsertFailed = 1
)

// Limits of the filter maps (their max_entries in tcp.bpf.c).
const (
	maxWatchedAddrs  = 256
	maxPorts         = 16 // per class; watched_ports holds 64
	maxEndpoints     = 8
	maxEndpointAddrs = 16
	maxNFSServers    = maxWatchedAddrs - maxEndpoints*maxEndpointAddrs
)

// tcpSpec returns the TCP object's spec with the destination map sized.
func tcpSpec(maxDestinations int) (*ebpf.CollectionSpec, error) {
	spec, err := loadTcp()
	if err != nil {
		return nil, err
	}
	spec.Maps["retransmits"].MaxEntries = uint32(maxDestinations)
	return spec, nil
}

func addrKey(a netip.Addr) tcpAddr {
	return tcpAddr{B: netip.AddrFrom16(a.As16()).As16()}
}

// watchSet is what the filter maps hold: address -> classes, port ->
// classes.
type watchSet struct {
	addrs map[netip.Addr]uint32
	ports map[uint16]uint32
}

func newWatchSet() watchSet {
	return watchSet{addrs: map[netip.Addr]uint32{}, ports: map[uint16]uint32{}}
}

func (w watchSet) add(class uint32, addrs []netip.Addr, ports []uint16) {
	for _, a := range addrs {
		w.addrs[a.Unmap()] |= class
	}
	for _, p := range ports {
		w.ports[p] |= class
	}
}

// syncMap makes m hold exactly want (keys K of the map, values classes).
func syncMap[K comparable](m *ebpf.Map, want map[K]uint32) error {
	var (
		key   K
		value uint32
		stale []K
	)
	it := m.Iterate()
	for it.Next(&key, &value) {
		if _, ok := want[key]; !ok {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	var errs []error
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	for k, v := range want {
		if err := m.Put(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// applyWatchSet writes w into the probe's filter maps.
func applyWatchSet(p *probe, w watchSet) error {
	addrs := make(map[tcpAddr]uint32, len(w.addrs))
	for a, c := range w.addrs {
		addrs[addrKey(a)] = c
	}
	if len(addrs) > maxWatchedAddrs {
		return fmt.Errorf("watched_addrs: %d addresses, the map holds %d", len(addrs), maxWatchedAddrs)
	}
	if err := syncMap(p.coll.Maps["watched_addrs"], addrs); err != nil {
		return fmt.Errorf("update watched_addrs: %w", err)
	}
	if err := syncMap(p.coll.Maps["watched_ports"], w.ports); err != nil {
		return fmt.Errorf("update watched_ports: %w", err)
	}
	return nil
}

// destination is one key of the retransmits map, decoded.
type destination struct {
	addr  netip.Addr
	port  uint16
	class uint32
}

// readRetransmits returns the retransmits map's counts.
func readRetransmits(m *ebpf.Map) (map[destination]uint64, error) {
	out := map[destination]uint64{}
	var (
		key tcpDestKey
		n   uint64
	)
	it := m.Iterate()
	for it.Next(&key, &n) {
		d := destination{addr: netip.AddrFrom16(key.Addr.B).Unmap(), port: key.Port, class: key.Class}
		out[d] = n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read retransmits: %w", err)
	}
	return out, nil
}

// retransmitTotals turns the LRU map's counts, which drop a destination
// when it is evicted, into counters that never go down: each scrape adds
// what every present key grew by since the last to the key's series, so
// an evicted key's counts stay in its series' total.
type retransmitTotals struct {
	last   map[destination]uint64
	totals map[seriesKey]uint64
}

// seriesKey is one retransmission series: a class and its label value.
type seriesKey struct {
	class uint32
	name  string
}

func newRetransmitTotals() *retransmitTotals {
	return &retransmitTotals{last: map[destination]uint64{}, totals: map[seriesKey]uint64{}}
}

// update adds the growth of every key in now to the series labelsOf names.
func (r *retransmitTotals) update(now map[destination]uint64, labelsOf func(destination) []string) {
	for d, n := range now {
		prev, seen := r.last[d]
		if !seen || n < prev {
			prev = 0 // new, or evicted and inserted again since the last read
		}
		if n == prev {
			continue
		}
		for _, name := range labelsOf(d) {
			r.totals[seriesKey{d.class, name}] += n - prev
		}
	}
	r.last = now
}

// ensure makes a series exist, at 0 until it counts.
func (r *retransmitTotals) ensure(class uint32, name string) {
	k := seriesKey{class, name}
	if _, ok := r.totals[k]; !ok {
		r.totals[k] = 0
	}
}

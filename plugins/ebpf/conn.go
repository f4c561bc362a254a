package main

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// The object-store connection programs' variants: all of a variant's
// programs load in one mode or the group does not run. tp_btf and
// tracepoint need the sock_send_length/sock_recv_length events (Linux
// 6.3+); fentry and kprobe hook the functions behind the events instead
// (tcp_set_state, tcp_sendmsg, tcp_cleanup_rbuf), for the kernels before
// that (conn.bpf.c). Their program label is the kernel function.
var connVariants = map[string]variant{
	attachFentry: {attach: attachFentry, hooks: []hook{
		{program: "fentry_tcp_set_state", event: "tcp_set_state"},
		{program: "fexit_tcp_sendmsg", event: "tcp_sendmsg", ret: true},
		{program: "fentry_tcp_cleanup_rbuf", event: "tcp_cleanup_rbuf"},
	}},
	attachKprobe: {attach: attachKprobe, hooks: []hook{
		{program: "kprobe_tcp_set_state", event: "tcp_set_state"},
		{program: "kprobe_tcp_sendmsg", event: "tcp_sendmsg"},
		{program: "kretprobe_tcp_sendmsg", event: "tcp_sendmsg", ret: true},
		{program: "kprobe_tcp_cleanup_rbuf", event: "tcp_cleanup_rbuf"},
	}},
	attachTPBTF: {attach: attachTPBTF, hooks: []hook{
		{program: "tpbtf_inet_sock_set_state", event: "inet_sock_set_state", group: "sock"},
		{program: "tpbtf_sock_send_length", event: "sock_send_length", group: "sock"},
		{program: "tpbtf_sock_recv_length", event: "sock_recv_length", group: "sock"},
	}},
	attachTracepoint: {attach: attachTracepoint, hooks: []hook{
		{program: "tp_inet_sock_set_state", event: "inet_sock_set_state", group: "sock"},
		{program: "tp_sock_send_length", event: "sock_send_length", group: "sock"},
		{program: "tp_sock_recv_length", event: "sock_recv_length", group: "sock"},
	}},
}

// Index of conn_counters (enum conn_counter).
const connStatsFull = 0

// The default connection latency buckets: native histogram schema 0 from
// 2^-10 s (about 1 ms) to 2^0 s (1 s).
const (
	minConnExp = -10
	maxConnExp = 0
)

func defaultConnBounds() []float64 {
	out := make([]float64, 0, maxConnExp-minConnExp+1)
	for i := minConnExp; i <= maxConnExp; i++ {
		out = append(out, schema0Bound(i))
	}
	return out
}

// connSpec returns the connection object's spec with the bounds set.
func connSpec(bounds []float64) (*ebpf.CollectionSpec, error) {
	spec, err := loadConn()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["bounds_ns"].Set(boundsNanoseconds(bounds)); err != nil {
		return nil, fmt.Errorf("set bounds_ns: %w", err)
	}
	if err := spec.Variables["nr_bounds"].Set(uint32(len(bounds))); err != nil {
		return nil, fmt.Errorf("set nr_bounds: %w", err)
	}
	if err := setKprobeKernelVersion(spec); err != nil {
		return nil, err
	}
	return spec, nil
}

// connCounts is one destination's counters: connections, latency_ns,
// bytes sent, bytes received, then the non-cumulative buckets.
type connCounts [4 + maxBounds + 1]uint64

const (
	ccConnections = iota
	ccLatencyNs
	ccSent
	ccReceived
	ccBuckets
)

// readConnStats reads conn_stats and deletes the keys of destinations that
// keep(addr) no longer watches, after reading their last counts.
func readConnStats(m *ebpf.Map, keep func(netip.Addr) bool) (map[destination]connCounts, error) {
	out := map[destination]connCounts{}
	var (
		key   connConnKey
		s     connConnStats
		stale []connConnKey
	)
	it := m.Iterate()
	for it.Next(&key, &s) {
		d := destination{addr: netip.AddrFrom16(key.Addr.B).Unmap(), port: key.Port, class: classObjectStore}
		var c connCounts
		c[ccConnections], c[ccLatencyNs], c[ccSent], c[ccReceived] = s.Connections, s.LatencyNs, s.BytesSent, s.BytesReceived
		copy(c[ccBuckets:], s.Buckets[:])
		out[d] = c
		if !keep(d.addr) {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read conn_stats: %w", err)
	}
	var errs []error
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete from conn_stats: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

// connTotals accumulates connCounts per endpoint so that they never go
// down when a destination's key is deleted or its address is resolved for
// another endpoint: like retransmitTotals, it adds each key's growth.
type connTotals struct {
	last   map[destination]connCounts
	totals map[string]*connCounts
}

func newConnTotals() *connTotals {
	return &connTotals{last: map[destination]connCounts{}, totals: map[string]*connCounts{}}
}

func (c *connTotals) update(now map[destination]connCounts, labelsOf func(destination) []string) {
	for d, n := range now {
		prev, seen := c.last[d]
		if !seen || n[ccConnections] < prev[ccConnections] || n[ccSent] < prev[ccSent] || n[ccReceived] < prev[ccReceived] {
			prev = connCounts{} // new, or deleted and created again
		}
		for _, name := range labelsOf(d) {
			t := c.ensure(name)
			for i := range n {
				t[i] += n[i] - prev[i]
			}
		}
	}
	c.last = now
}

func (c *connTotals) ensure(name string) *connCounts {
	t, ok := c.totals[name]
	if !ok {
		t = &connCounts{}
		c.totals[name] = t
	}
	return t
}

// SPDX-License-Identifier: GPL-2.0
/* rtt.bpf.c: the kernel's smoothed TCP round-trip time (srtt) to the
 * destinations the exporter watches (NFS servers, object-store endpoints),
 * sampled at every segment an established socket receives (tcp_probe).
 *
 * The filter maps are the retransmission program's (tcp.bpf.c), filled the
 * same way: an RTT counts for every class that both the destination
 * address and port belong to. One histogram per destination and class.
 *
 *   tp_btf:     the struct sock; srtt_us (in 1/8 µs) of its tcp_sock.
 *   tracepoint: the classic tcp:tcp_probe event (srtt in µs, destination
 *               as a sockaddr).
 */
#include "common.h"

char _license[] SEC("license") = "GPL";

volatile const __u32 nr_bounds = 0;
volatile const __u64 bounds_ns[MAX_BOUNDS] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct addr);
	__type(value, __u32);
} watched_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16); /* host byte order */
	__type(value, __u32);
} watched_ports SEC(".maps");

struct rtt_key {
	struct addr addr;
	__u16 port;
	__u16 pad;
	__u32 class;
};

struct rtt_stats {
	__u64 samples;
	__u64 srtt_ns;
	__u64 buckets[MAX_BOUNDS + 1];
};

/* Per-CPU, not preallocated; sized to max_destinations by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct rtt_key);
	__type(value, struct rtt_stats);
} rtt_stats SEC(".maps");

enum rtt_counter {
	RTT_STATS_FULL = 0, /* a new destination did not fit into rtt_stats */
	RTT_COUNTER_MAX = 1,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RTT_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} rtt_counters SEC(".maps");

static __always_inline void record(struct addr *a, __u16 port, __u64 srtt_ns)
{
	__u32 *am = bpf_map_lookup_elem(&watched_addrs, a);
	if (!am)
		return;
	__u32 *pm = bpf_map_lookup_elem(&watched_ports, &port);
	if (!pm)
		return;
	__u32 classes = *am & *pm;
	__u32 i = bucket_index(bounds_ns, nr_bounds, srtt_ns);
	if (i > MAX_BOUNDS)
		i = MAX_BOUNDS;
	for (int c = 0; c < NR_CLASSES; c++) {
		__u32 class = 1u << c;
		if (!(classes & class))
			continue;
		struct rtt_key key = {.port = port, .class = class};
		__builtin_memcpy(&key.addr, a, sizeof(key.addr));
		struct rtt_stats *s = bpf_map_lookup_elem(&rtt_stats, &key);
		if (!s) {
			struct rtt_stats zero = {};
			bpf_map_update_elem(&rtt_stats, &key, &zero, BPF_NOEXIST);
			s = bpf_map_lookup_elem(&rtt_stats, &key);
			if (!s) {
				__u32 which = RTT_STATS_FULL;
				__u64 *n = bpf_map_lookup_elem(&rtt_counters, &which);
				if (n)
					*n += 1;
				continue;
			}
		}
		s->samples += 1;
		s->srtt_ns += srtt_ns;
		s->buckets[i] += 1;
	}
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(tpbtf_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	struct addr a;
	__u16 family = sk->__sk_common.skc_family;
	if (family == AF_INET)
		mapped_v4(&a, sk->__sk_common.skc_daddr);
	else if (family == AF_INET6)
		BPF_CORE_READ_INTO(&a, sk, __sk_common.skc_v6_daddr);
	else
		return 0;
	/* tcp_sock is beyond the struct sock the verifier knows the pointer
	 * as: read with a helper. srtt_us holds 8 times the RTT in µs. */
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 srtt8 = 0;
	if (bpf_core_read(&srtt8, sizeof(srtt8), &tp->srtt_us) || srtt8 == 0)
		return 0; /* no RTT measured yet */
	record(&a, bpf_ntohs(sk->__sk_common.skc_dport), (__u64)(srtt8 >> 3) * 1000);
	return 0;
}

SEC("tracepoint/tcp/tcp_probe")
int tp_tcp_probe(struct trace_event_raw_tcp_probe *ctx)
{
	/* daddr is a sockaddr_in or sockaddr_in6; copied with a helper (the
	 * verifier refuses loads through a moved context pointer). */
	__u8 sa[24];
	if (bpf_probe_read_kernel(sa, sizeof(sa), ctx->daddr))
		return 0;
	struct addr a;
	__u16 family = ctx->family;
	if (family == AF_INET) {
		__be32 v4;
		__builtin_memcpy(&v4, &sa[4], 4);
		mapped_v4(&a, v4);
	} else if (family == AF_INET6) {
		__builtin_memcpy(&a, &sa[8], sizeof(a));
	} else {
		return 0;
	}
	__u32 srtt_us = ctx->srtt;
	if (srtt_us == 0)
		return 0;
	record(&a, ctx->dport, (__u64)srtt_us * 1000); /* dport in host order */
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/* tcp.bpf.c: TCP retransmissions per destination, for the destinations the
 * exporter watches (NFS servers, object-store endpoints).
 *
 * The exporter fills two filter maps: watched_addrs (address -> classes)
 * and watched_ports (port -> classes). A retransmission is counted for
 * every class that both its destination address and its destination port
 * belong to, so an NFS server's port 443 is not counted as NFS traffic.
 * Counts live in an LRU map of bounded size; every key the programs insert
 * is counted, so the exporter can tell evictions (inserted - present).
 */
#include "common.h"

char _license[] SEC("license") = "GPL";

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

struct dest_key {
	struct addr addr;
	__u16 port;
	__u16 pad;
	__u32 class;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024); /* max_destinations, set by the loader */
	__type(key, struct dest_key);
	__type(value, __u64);
} retransmits SEC(".maps");

/* Counters (index into tcp_counters). */
enum tcp_counter {
	TCP_INSERTED = 0,     /* keys inserted into retransmits */
	TCP_INSERT_FAILED = 1, /* an update of retransmits failed */
	TCP_COUNTER_MAX = 2,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TCP_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tcp_counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&tcp_counters, &which);
	if (n)
		*n += 1;
}

static __always_inline void record(struct addr *a, __u16 port)
{
	__u32 *am = bpf_map_lookup_elem(&watched_addrs, a);
	if (!am)
		return;
	__u32 *pm = bpf_map_lookup_elem(&watched_ports, &port);
	if (!pm)
		return;
	__u32 classes = *am & *pm;
	for (int i = 0; i < NR_CLASSES; i++) {
		__u32 class = 1u << i;
		if (!(classes & class))
			continue;
		struct dest_key key = {.port = port, .class = class};
		__builtin_memcpy(&key.addr, a, sizeof(key.addr));
		__u64 *n = bpf_map_lookup_elem(&retransmits, &key);
		if (n) {
			__sync_fetch_and_add(n, 1);
			continue;
		}
		__u64 one = 1;
		/* NOEXIST: on a race with another CPU, add to its entry. */
		if (bpf_map_update_elem(&retransmits, &key, &one, BPF_NOEXIST) == 0) {
			count(TCP_INSERTED);
			continue;
		}
		n = bpf_map_lookup_elem(&retransmits, &key);
		if (n)
			__sync_fetch_and_add(n, 1);
		else
			count(TCP_INSERT_FAILED);
	}
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tpbtf_tcp_retransmit_skb, const struct sock *sk, const struct sk_buff *skb)
{
	struct addr a;
	__u16 family = sk->__sk_common.skc_family;
	if (family == AF_INET)
		mapped_v4(&a, sk->__sk_common.skc_daddr);
	else if (family == AF_INET6)
		BPF_CORE_READ_INTO(&a, sk, __sk_common.skc_v6_daddr);
	else
		return 0;
	record(&a, bpf_ntohs(sk->__sk_common.skc_dport));
	return 0;
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int tp_tcp_retransmit_skb(struct trace_event_raw_tcp_retransmit_skb *ctx)
{
	struct addr a;
	__u16 family = ctx->family;
	/* Copied with a helper: the verifier refuses loads through a moved
	 * context pointer (ctx + offsetof(daddr)). */
	if (family == AF_INET) {
		__be32 v4;
		if (bpf_probe_read_kernel(&v4, sizeof(v4), ctx->daddr))
			return 0;
		mapped_v4(&a, v4);
	} else if (family == AF_INET6) {
		if (bpf_probe_read_kernel(&a, sizeof(a), ctx->daddr_v6))
			return 0;
	} else {
		return 0;
	}
	record(&a, ctx->dport); /* the event stores ports in host order */
	return 0;
}

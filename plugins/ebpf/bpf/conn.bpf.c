// SPDX-License-Identifier: GPL-2.0
/* conn.bpf.c: TCP connections to the watched object-store destinations:
 * connection latency (SYN sent to established, as the client sees it),
 * connections established, bytes sent and received.
 *
 * The filter maps are the retransmission program's (watched_addrs,
 * watched_ports, same layout); only the object-store class counts here.
 * Stats are kept per destination (address, port) in a map bounded by the
 * filter: the exporter deletes the keys of destinations no longer watched.
 *
 * Four attach modes, each a complete set (conn.go's variants):
 *   tp_btf, tracepoint: inet_sock_set_state, sock_send_length and
 *               sock_recv_length (the last two: Linux 6.3+);
 *   fentry:     fentry/tcp_set_state (the old state is the socket's before
 *               the change), fexit/tcp_sendmsg (its return value: the bytes
 *               sent) and fentry/tcp_cleanup_rbuf (the bytes a read copied);
 *   kprobe:     the same functions as kprobes; tcp_sendmsg's socket is kept
 *               by thread from its entry to its kretprobe.
 * The fentry and kprobe modes count bytes read with MSG_PEEK too
 * (tcp_cleanup_rbuf is called for them with what was copied). The object
 * is built per architecture because the kprobes read registers.
 */
#include "common.h"

char _license[] SEC("license") = "GPL";

/* Connection latency bounds in nanoseconds, set by the loader. */
volatile const __u32 nr_bounds = 0;
volatile const __u64 bounds_ns[MAX_BOUNDS] = {};

#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_CLOSE 7
#define MSG_PEEK 2

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct addr);
	__type(value, __u32);
} watched_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u32);
} watched_ports SEC(".maps");

/* SYN_SENT times by socket. LRU: a socket whose next state is never seen
 * is evicted. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} connect_start SEC(".maps");

struct conn_key {
	struct addr addr;
	__u16 port;
	__u16 pad;
};

struct conn_stats {
	__u64 connections;
	__u64 latency_ns;
	__u64 bytes_sent;
	__u64 bytes_received;
	__u64 buckets[MAX_BOUNDS + 1];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 2048);
	__type(key, struct conn_key);
	__type(value, struct conn_stats);
} conn_stats SEC(".maps");

enum conn_counter {
	CONN_STATS_FULL = 0,
	CONN_COUNTER_MAX = 1,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CONN_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} conn_counters SEC(".maps");

/* watched reports whether addr:port is an object-store destination. */
static __always_inline bool watched(struct addr *a, __u16 port)
{
	__u32 *am = bpf_map_lookup_elem(&watched_addrs, a);
	if (!am || !(*am & CLASS_OBJECT_STORE))
		return false;
	__u32 *pm = bpf_map_lookup_elem(&watched_ports, &port);
	return pm && (*pm & CLASS_OBJECT_STORE);
}

static __always_inline struct conn_stats *stats_of(struct addr *a, __u16 port)
{
	struct conn_key key = {.port = port};
	__builtin_memcpy(&key.addr, a, sizeof(key.addr));
	struct conn_stats *s = bpf_map_lookup_elem(&conn_stats, &key);
	if (s)
		return s;
	struct conn_stats zero = {};
	bpf_map_update_elem(&conn_stats, &key, &zero, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&conn_stats, &key);
	if (!s) {
		__u32 which = CONN_STATS_FULL;
		__u64 *n = bpf_map_lookup_elem(&conn_counters, &which);
		if (n)
			*n += 1;
	}
	return s;
}

static __always_inline void state_change(__u64 sk, struct addr *a, __u16 port, int oldstate, int newstate)
{
	if (!watched(a, port))
		return;
	if (newstate == TCP_SYN_SENT) {
		__u64 now = bpf_ktime_get_ns();
		bpf_map_update_elem(&connect_start, &sk, &now, BPF_ANY);
		return;
	}
	if (oldstate != TCP_SYN_SENT)
		return;
	/* SYN_SENT -> ESTABLISHED, or -> CLOSE (refused, timed out) */
	__u64 *start = bpf_map_lookup_elem(&connect_start, &sk);
	if (!start)
		return;
	__u64 latency = bpf_ktime_get_ns() - *start;
	bpf_map_delete_elem(&connect_start, &sk);
	if (newstate != TCP_ESTABLISHED)
		return;
	struct conn_stats *s = stats_of(a, port);
	if (!s)
		return;
	__u32 i = bucket_index(bounds_ns, nr_bounds, latency);
	if (i > MAX_BOUNDS)
		i = MAX_BOUNDS;
	__sync_fetch_and_add(&s->connections, 1);
	__sync_fetch_and_add(&s->latency_ns, latency);
	__sync_fetch_and_add(&s->buckets[i], 1);
}

/* sock_dest reads a TCP socket's destination; false for other sockets. */
static __always_inline bool sock_dest(const struct sock *sk, struct addr *a, __u16 *port)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return false;
	if (family == AF_INET)
		mapped_v4(a, BPF_CORE_READ(sk, __sk_common.skc_daddr));
	else if (family == AF_INET6)
		BPF_CORE_READ_INTO(a, sk, __sk_common.skc_v6_daddr);
	else
		return false;
	*port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	return true;
}

static __always_inline void count_bytes(const struct sock *sk, int ret, int flags, bool sent)
{
	if (ret <= 0 || (!sent && (flags & MSG_PEEK)))
		return;
	struct addr a;
	__u16 port;
	if (!sock_dest(sk, &a, &port) || !watched(&a, port))
		return;
	struct conn_stats *s = stats_of(&a, port);
	if (!s)
		return;
	if (sent)
		__sync_fetch_and_add(&s->bytes_sent, ret);
	else
		__sync_fetch_and_add(&s->bytes_received, ret);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tpbtf_inet_sock_set_state, const struct sock *sk, int oldstate, int newstate)
{
	struct addr a;
	__u16 port;
	if (!sock_dest(sk, &a, &port))
		return 0;
	state_change((__u64)sk, &a, port, oldstate, newstate);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(tpbtf_sock_send_length, struct sock *sk, int ret, int flags)
{
	count_bytes(sk, ret, flags, true);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(tpbtf_sock_recv_length, struct sock *sk, int ret, int flags)
{
	count_bytes(sk, ret, flags, false);
	return 0;
}

SEC("tracepoint/sock/inet_sock_set_state")
int tp_inet_sock_set_state(struct trace_event_raw_inet_sock_set_state *ctx)
{
	if (ctx->protocol != IPPROTO_TCP)
		return 0;
	struct addr a;
	__u16 family = ctx->family;
	/* Copied with a helper: the verifier refuses loads through a moved
	 * context pointer. */
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
	state_change((__u64)ctx->skaddr, &a, ctx->dport, ctx->oldstate, ctx->newstate);
	return 0;
}

SEC("tracepoint/sock/sock_send_length")
int tp_sock_send_length(struct trace_event_raw_sock_msg_length *ctx)
{
	if (ctx->protocol != IPPROTO_TCP)
		return 0;
	count_bytes((const struct sock *)ctx->sk, ctx->ret, ctx->flags, true);
	return 0;
}

SEC("tracepoint/sock/sock_recv_length")
int tp_sock_recv_length(struct trace_event_raw_sock_msg_length *ctx)
{
	if (ctx->protocol != IPPROTO_TCP)
		return 0;
	count_bytes((const struct sock *)ctx->sk, ctx->ret, ctx->flags, false);
	return 0;
}

/* The functions behind the events, for kernels without sock_*_length. */

static __always_inline void set_state(struct sock *sk, int newstate)
{
	struct addr a;
	__u16 port;
	if (!sock_dest(sk, &a, &port))
		return;
	int oldstate = BPF_CORE_READ(sk, __sk_common.skc_state);
	state_change((__u64)sk, &a, port, oldstate, newstate);
}

SEC("fentry/tcp_set_state")
int BPF_PROG(fentry_tcp_set_state, struct sock *sk, int state)
{
	set_state(sk, state);
	return 0;
}

SEC("fexit/tcp_sendmsg")
int BPF_PROG(fexit_tcp_sendmsg, struct sock *sk, struct msghdr *msg, unsigned long size, int ret)
{
	count_bytes(sk, ret, 0, true);
	return 0;
}

SEC("fentry/tcp_cleanup_rbuf")
int BPF_PROG(fentry_tcp_cleanup_rbuf, struct sock *sk, int copied)
{
	count_bytes(sk, copied, 0, false);
	return 0;
}

/* tcp_sendmsg's watched sockets by thread, from the kprobe to the
 * kretprobe. LRU: a return that is never seen (kretprobe instances
 * exhausted) leaves an entry that is evicted, not leaked. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} sendmsg_sock SEC(".maps");

SEC("kprobe/tcp_set_state")
int BPF_KPROBE(kprobe_tcp_set_state, struct sock *sk, int state)
{
	set_state(sk, state);
	return 0;
}

SEC("kprobe/tcp_sendmsg")
int BPF_KPROBE(kprobe_tcp_sendmsg, struct sock *sk)
{
	struct addr a;
	__u16 port;
	/* Only watched sockets are remembered: the kretprobe of every other
	 * send pays one lookup and nothing else. */
	if (!sock_dest(sk, &a, &port) || !watched(&a, port))
		return 0;
	__u64 tid = bpf_get_current_pid_tgid();
	__u64 skp = (__u64)sk;
	bpf_map_update_elem(&sendmsg_sock, &tid, &skp, BPF_ANY);
	return 0;
}

SEC("kretprobe/tcp_sendmsg")
int BPF_KRETPROBE(kretprobe_tcp_sendmsg, int ret)
{
	__u64 tid = bpf_get_current_pid_tgid();
	__u64 *skp = bpf_map_lookup_elem(&sendmsg_sock, &tid);
	if (!skp)
		return 0;
	const struct sock *sk = (const struct sock *)*skp;
	bpf_map_delete_elem(&sendmsg_sock, &tid);
	count_bytes(sk, ret, 0, true);
	return 0;
}

SEC("kprobe/tcp_cleanup_rbuf")
int BPF_KPROBE(kprobe_tcp_cleanup_rbuf, struct sock *sk, int copied)
{
	count_bytes(sk, copied, 0, false);
	return 0;
}

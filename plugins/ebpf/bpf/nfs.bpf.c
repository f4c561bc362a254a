// SPDX-License-Identifier: GPL-2.0
/* nfs.bpf.c: NFS client RPC latency, requests and RPC retransmissions per
 * server, NFS version and procedure, from sunrpc:rpc_stats_latency (the
 * event the client's per-op statistics in mountstats are counted from).
 *
 * The event fires once per completed RPC of any sunrpc client; only the
 * NFS program (100003) is counted. The kernel side sees the transport's
 * server address, not the superblock: the exporter maps a server and
 * version to a volume_id from the mount table.
 *
 * Three attach modes:
 *   tp_btf, raw_tp: the rpc_task itself: the server's sockaddr, the
 *               client's program and version, the procedure's name, the
 *               request's transmissions (rq_ntrans) and the execute time
 *               in ns.
 *   tracepoint: the classic event, whose record holds the server address
 *               as text, the version, the procedure's name and the execute
 *               time in microseconds; no transmission count.
 * All need the sunrpc module's types (CO-RE, from its BTF) and event: on a
 * kernel without an NFS client none loads.
 */
#include "common.h"

char _license[] SEC("license") = "GPL";

volatile const __u32 nr_bounds = 0;
volatile const __u64 bounds_ns[MAX_BOUNDS] = {};

#define NFS_PROGRAM 100003
#define PROC_NAME_LEN 24
#define ADDR_TEXT_LEN 40

/* One series of the exporter: the address is binary (struct addr, IPv4
 * mapped) when addr_text is 0, else the text the classic event recorded
 * (NUL-terminated, ADDR_TEXT_LEN at most). Zeroed before it is filled:
 * hash keys compare every byte. */
struct nfs_key {
	char proc[PROC_NAME_LEN];
	__u8 addr[ADDR_TEXT_LEN];
	__u32 vers;
	__u32 addr_text;
};

struct nfs_stats {
	__u64 requests;
	__u64 retransmits; /* transmissions beyond the first (not in tracepoint mode) */
	__u64 latency_ns;
	__u64 buckets[MAX_BOUNDS + 1];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct nfs_key);
	__type(value, struct nfs_stats);
} nfs_stats SEC(".maps");

/* Counters (index into nfs_counters). */
enum nfs_counter {
	NFS_STATS_FULL = 0, /* a new series did not fit into nfs_stats */
	NFS_COUNTER_MAX = 1,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NFS_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} nfs_counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&nfs_counters, &which);
	if (n)
		*n += 1;
}

static __always_inline void record(struct nfs_key *key, __u64 latency_ns, __u64 retransmits)
{
	struct nfs_stats *s = bpf_map_lookup_elem(&nfs_stats, key);
	if (!s) {
		struct nfs_stats zero = {};
		/* NOEXIST: another CPU may have created it since the lookup. */
		bpf_map_update_elem(&nfs_stats, key, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&nfs_stats, key);
		if (!s) {
			count(NFS_STATS_FULL);
			return;
		}
	}
	__u32 i = bucket_index(bounds_ns, nr_bounds, latency_ns);
	if (i > MAX_BOUNDS)
		i = MAX_BOUNDS;
	s->requests += 1;
	s->retransmits += retransmits;
	s->latency_ns += latency_ns;
	s->buckets[i] += 1;
}

/* sockaddr_in and sockaddr_in6 as far as the address (uapi layout). */
struct server_sockaddr {
	__u16 family;
	__be16 port;
	union {
		__be32 v4;        /* sockaddr_in.sin_addr */
		struct {
			__u32 flowinfo;
			__u8 v6[16]; /* sockaddr_in6.sin6_addr */
		};
	};
};

/* record_task counts one completed RPC of task. Every read is a CO-RE
 * probe read, so that the raw_tp program (untyped arguments) can share it
 * with the tp_btf one. */
static __always_inline void record_task(const struct rpc_task *task, ktime_t execute)
{
	struct rpc_clnt *clnt = BPF_CORE_READ(task, tk_client);
	if (!clnt || BPF_CORE_READ(clnt, cl_prog) != NFS_PROGRAM)
		return;
	struct nfs_key key;
	__builtin_memset(&key, 0, sizeof(key));
	key.vers = BPF_CORE_READ(clnt, cl_vers);

	struct rpc_xprt *xprt = BPF_CORE_READ(task, tk_xprt);
	if (!xprt)
		return;
	struct server_sockaddr sa = {};
	if (bpf_core_read(&sa, sizeof(sa), &xprt->addr))
		return;
	struct addr *a = (struct addr *)key.addr;
	if (sa.family == AF_INET)
		mapped_v4(a, sa.v4);
	else if (sa.family == AF_INET6)
		__builtin_memcpy(a, sa.v6, sizeof(*a));
	else
		return;

	const struct rpc_procinfo *proc = BPF_CORE_READ(task, tk_msg.rpc_proc);
	if (!proc)
		return;
	const char *name = BPF_CORE_READ(proc, p_name);
	if (!name || bpf_probe_read_kernel_str(key.proc, sizeof(key.proc), name) < 0)
		return;

	__u64 retransmits = 0;
	struct rpc_rqst *rq = BPF_CORE_READ(task, tk_rqstp);
	if (rq) {
		int ntrans = BPF_CORE_READ(rq, rq_ntrans);
		if (ntrans > 1)
			retransmits = ntrans - 1;
	}
	if (execute < 0)
		execute = 0;
	record(&key, (__u64)execute, retransmits);
}

SEC("tp_btf/rpc_stats_latency")
int BPF_PROG(tpbtf_rpc_stats_latency, const struct rpc_task *task, ktime_t backlog, ktime_t rtt, ktime_t execute)
{
	record_task(task, execute);
	return 0;
}

/* The same event as a raw tracepoint: attached by name, which finds a
 * module's tracepoint without the module's BTF object (tp_btf needs its
 * id, and listing BTF objects needs CAP_SYS_ADMIN). */
SEC("raw_tp/rpc_stats_latency")
int BPF_PROG(raw_rpc_stats_latency, const struct rpc_task *task, ktime_t backlog, ktime_t rtt, ktime_t execute)
{
	record_task(task, execute);
	return 0;
}

/* data_loc_str copies a __data_loc string of a classic event record (low
 * 16 bits: its offset in the record) with a helper: the verifier refuses
 * loads through a moved context pointer. */
static __always_inline int data_loc_str(void *ctx, __u32 loc, char *dst, __u32 size)
{
	return bpf_probe_read_kernel_str(dst, size, (char *)ctx + (loc & 0xffff));
}

SEC("tracepoint/sunrpc/rpc_stats_latency")
int tp_rpc_stats_latency(struct trace_event_raw_rpc_stats_latency *ctx)
{
	char prog[4];
	if (data_loc_str(ctx, ctx->__data_loc_progname, prog, sizeof(prog)) < 0)
		return 0;
	/* The NFS client's program is named "nfs" (nfs_program.name). */
	if (prog[0] != 'n' || prog[1] != 'f' || prog[2] != 's' || prog[3] != 0)
		return 0;
	struct nfs_key key;
	__builtin_memset(&key, 0, sizeof(key));
	key.vers = ctx->version;
	key.addr_text = 1;
	if (data_loc_str(ctx, ctx->__data_loc_addr, (char *)key.addr, sizeof(key.addr)) < 0)
		return 0;
	if (data_loc_str(ctx, ctx->__data_loc_procname, key.proc, sizeof(key.proc)) < 0)
		return 0;
	/* The event records microseconds (ktime_to_us). */
	record(&key, (__u64)ctx->execute * 1000, 0);
	return 0;
}

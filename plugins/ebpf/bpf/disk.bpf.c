// SPDX-License-Identifier: GPL-2.0
/* disk.bpf.c: block request latency, bytes and completions per device and
 * direction (read, write).
 *
 * Two attach modes, loaded as pairs (an issue program's start times are only
 * meaningful to the completion program of the same mode):
 *   tp_btf:     block_rq_issue/block_rq_complete with the struct request
 *               itself, keyed by its address; the device is the request's
 *               gendisk.
 *   tracepoint: the classic block:block_rq_issue/complete events, keyed by
 *               dev+sector (what the event records); needs tracefs.
 */
#include "common.h"

char _license[] SEC("license") = "GPL";

/* Histogram bounds in nanoseconds, set by the loader before load. */
volatile const __u32 nr_bounds = 0;
volatile const __u64 bounds_ns[MAX_BOUNDS] = {};

enum disk_op {
	DISK_READ = 0,
	DISK_WRITE = 1,
};

/* REQ_OP_MASK and the two operations counted (include/linux/blk_types.h). */
#define REQ_OP_BITS 8
#define REQ_OP_MASK ((1 << REQ_OP_BITS) - 1)
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1

/* The kernel's dev_t: major in the bits above MINORBITS (20). */
#define MINORBITS 20

struct disk_key {
	__u32 dev;
	__u32 op;
};

struct disk_stats {
	__u64 ios;
	__u64 bytes;
	__u64 latency_ns;
	__u64 buckets[MAX_BOUNDS + 1];
};

/* Errors the programs count (index into disk_errors). */
enum disk_error {
	DISK_ERR_STATS_FULL = 0,  /* a new device did not fit into disk_stats */
	DISK_ERR_START_UPDATE = 1, /* an issue time could not be stored */
	DISK_ERR_MAX = 2,
};

/* Issue times. LRU: a request whose completion is never seen (issued
 * before a detach, or a driver that ends requests another way) is evicted
 * instead of filling the map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} start_by_request SEC(".maps");

struct sector_key {
	__u64 sector;
	__u32 dev;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sector_key);
	__type(value, __u64);
} start_by_sector SEC(".maps");

/* Per-CPU so that completions on different CPUs never contend; the
 * exporter sums the CPUs. Not preallocated: a per-CPU value is 288 bytes
 * times the CPUs, for every possible entry. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 256);
	__type(key, struct disk_key);
	__type(value, struct disk_stats);
} disk_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DISK_ERR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} disk_errors SEC(".maps");

static __always_inline void count_error(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&disk_errors, &which);
	if (n)
		*n += 1;
}

static __always_inline void record(__u32 dev, __u32 op, __u64 bytes, __u64 latency_ns)
{
	struct disk_key key = {.dev = dev, .op = op};
	struct disk_stats *s = bpf_map_lookup_elem(&disk_stats, &key);
	if (!s) {
		/* NOEXIST: another CPU may have created it since the lookup. */
		struct disk_stats zero = {};
		bpf_map_update_elem(&disk_stats, &key, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&disk_stats, &key);
		if (!s) {
			count_error(DISK_ERR_STATS_FULL);
			return;
		}
	}
	__u32 i = bucket_index(bounds_ns, nr_bounds, latency_ns);
	if (i > MAX_BOUNDS)
		i = MAX_BOUNDS;
	s->ios += 1;
	s->bytes += bytes;
	s->latency_ns += latency_ns;
	s->buckets[i] += 1;
}

/* op_of returns the counted direction of request flags, or -1. */
static __always_inline int op_of(blk_opf_t flags)
{
	switch (flags & REQ_OP_MASK) {
	case REQ_OP_READ:
		return DISK_READ;
	case REQ_OP_WRITE:
		return DISK_WRITE;
	}
	return -1;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(tpbtf_block_rq_issue, struct request *rq)
{
	if (op_of(rq->cmd_flags) < 0)
		return 0;
	__u64 key = (__u64)rq;
	__u64 now = bpf_ktime_get_ns();
	/* A request's entry outlives its completion (zeroed there, below), and
	 * blk-mq reuses its requests: most issues find their key and store in
	 * place, cheaper than an update (which replaces the element). */
	__u64 *start = bpf_map_lookup_elem(&start_by_request, &key);
	if (start) {
		*start = now;
		return 0;
	}
	if (bpf_map_update_elem(&start_by_request, &key, &now, BPF_ANY))
		count_error(DISK_ERR_START_UPDATE);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(tpbtf_block_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	/* The direction first: a request the issue program skipped (flush,
	 * discard) costs no map lookup. */
	int op = op_of(rq->cmd_flags);
	if (op < 0)
		return 0;
	__u64 key = (__u64)rq;
	__u64 *start = bpf_map_lookup_elem(&start_by_request, &key);
	if (!start || !*start)
		return 0;
	__u64 latency = bpf_ktime_get_ns() - *start;
	/* Consumed: zeroed in place instead of deleted, which spares a hash
	 * operation per request. The entry stays until the request's next
	 * issue overwrites it (blk-mq reuses a fixed pool of requests, so the
	 * keys are few) or the LRU evicts it. */
	*start = 0;
	struct gendisk *disk = rq->q->disk;
	if (!disk)
		return 0;
	__u32 dev = ((__u32)disk->major << MINORBITS) | (__u32)disk->first_minor;
	record(dev, op, nr_bytes, latency);
	return 0;
}

/* rwbs_op reads the direction from a classic event's rwbs string: an
 * optional 'F' (preflush) and then the operation letter. The verifier
 * refuses loads through a moved context pointer (ctx + offsetof(rwbs)),
 * so the two characters are copied out with a helper. */
static __always_inline int rwbs_op(const char *rwbs)
{
	char c[2];
	if (bpf_probe_read_kernel(c, sizeof(c), rwbs))
		return -1;
	char op = c[0] == 'F' ? c[1] : c[0];
	if (op == 'R')
		return DISK_READ;
	if (op == 'W')
		return DISK_WRITE;
	return -1;
}

SEC("tracepoint/block/block_rq_issue")
int tp_block_rq_issue(struct trace_event_raw_block_rq *ctx)
{
	if (rwbs_op(ctx->rwbs) < 0)
		return 0;
	struct sector_key key = {.sector = ctx->sector, .dev = ctx->dev};
	__u64 now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start_by_sector, &key, &now, BPF_ANY))
		count_error(DISK_ERR_START_UPDATE);
	return 0;
}

SEC("tracepoint/block/block_rq_complete")
int tp_block_rq_complete(struct trace_event_raw_block_rq_completion *ctx)
{
	struct sector_key key = {.sector = ctx->sector, .dev = ctx->dev};
	__u64 *start = bpf_map_lookup_elem(&start_by_sector, &key);
	if (!start || !*start)
		return 0;
	__u64 latency = bpf_ktime_get_ns() - *start;
	/* Deleted, not zeroed as in tp_btf mode: sectors are not a small
	 * reused set like requests, so a zeroed entry would only crowd the
	 * LRU. */
	bpf_map_delete_elem(&start_by_sector, &key);
	int op = rwbs_op(ctx->rwbs);
	if (op < 0)
		return 0;
	record(key.dev, op, (__u64)ctx->nr_sector << 9, latency);
	return 0;
}

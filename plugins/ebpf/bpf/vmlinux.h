/* vmlinux.h: the kernel types the plexporter-ebpf programs read, as
 * `bpftool btf dump file /sys/kernel/btf/vmlinux format c` prints them on
 * Linux 6.18, cut down to the members used. Every struct carries
 * preserve_access_index, so clang records each member access as a CO-RE
 * relocation and the loader rewrites the offsets to the running kernel's
 * BTF: the layout below only has to name the members, not match a kernel.
 * A member that a kernel lacks fails that one program's load (reported as
 * ebpf_program_loaded 0), never the others. */
#ifndef PLEXPORTER_VMLINUX_H
#define PLEXPORTER_VMLINUX_H
/* What bpf_tracing.h tests for kernel-side register names (x86: di, not rdi). */
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef short unsigned int __u16;
typedef unsigned int __u32;
typedef long long unsigned int __u64;
typedef signed char __s8;
typedef short int __s16;
typedef int __s32;
typedef long long int __s64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum {
	false = 0,
	true = 1,
};
typedef __u32 dev_t;
typedef __u64 sector_t;
typedef __u32 blk_opf_t;
typedef __s64 ktime_t;

/* The map types and update flags the programs use (uapi linux/bpf.h). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_F_NO_PREALLOC = 1,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct trace_entry {
	short unsigned int type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
};

struct gendisk {
	int major;
	int first_minor;
};

struct request_queue {
	struct gendisk *disk;
};

struct request {
	struct request_queue *q;
	blk_opf_t cmd_flags;
	unsigned int __data_len;
	sector_t __sector;
};

/* block:block_rq_issue (and insert, merge) */
struct trace_event_raw_block_rq {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	unsigned int bytes;
	short unsigned int ioprio;
	char rwbs[10];
};

/* block:block_rq_complete */
struct trace_event_raw_block_rq_completion {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	int error;
	short unsigned int ioprio;
	char rwbs[10];
};

struct in6_addr {
	union {
		__u8 u6_addr8[16];
		__be16 u6_addr16[8];
		__be32 u6_addr32[4];
	} in6_u;
};

struct sock_common {
	struct {
		__be32 skc_daddr;
		__be32 skc_rcv_saddr;
	};
	struct {
		__be16 skc_dport;
		__u16 skc_num;
	};
	short unsigned int skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
};

struct msghdr;

/* The registers a kprobe reads its arguments from (conn.bpf.c's kprobe
 * variant; built per architecture, bpf2go defines __TARGET_ARCH_*). */
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	long unsigned int bp;
	long unsigned int ax;
	long unsigned int cx;
	long unsigned int dx;
	long unsigned int si;
	long unsigned int di;
	long unsigned int r8;
	long unsigned int ip;
	long unsigned int sp;
};
#elif defined(__TARGET_ARCH_arm64)
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
struct pt_regs {
	union {
		struct user_pt_regs user_regs;
		struct {
			__u64 regs[31];
			__u64 sp;
			__u64 pc;
			__u64 pstate;
		};
	};
};
#endif

struct sock {
	struct sock_common __sk_common;
	u16 sk_protocol;
};

struct sk_buff {
	unsigned int len;
};

/* tcp:tcp_retransmit_skb */
struct trace_event_raw_tcp_retransmit_skb {
	struct trace_entry ent;
	const void *skbaddr;
	const void *skaddr;
	int state;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
};

/* sock:inet_sock_set_state */
struct trace_event_raw_inet_sock_set_state {
	struct trace_entry ent;
	const void *skaddr;
	int oldstate;
	int newstate;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 protocol;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
};

/* sock:sock_send_length, sock:sock_recv_length */
struct trace_event_raw_sock_msg_length {
	struct trace_entry ent;
	void *sk;
	__u16 family;
	__u16 protocol;
	int ret;
	int flags;
};

struct tcp_sock {
	__u32 srtt_us;
};

/* tcp:tcp_probe; srtt in µs, ports in host order. */
struct trace_event_raw_tcp_probe {
	struct trace_entry ent;
	__u8 saddr[28];
	__u8 daddr[28];
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u32 mark;
	__u16 data_len;
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 snd_cwnd;
	__u32 ssthresh;
	__u32 snd_wnd;
	__u32 srtt;
	__u32 rcv_wnd;
};

/* sunrpc (the NFS client's RPC layer; a module on most kernels, whose BTF
 * then holds these types). */
struct sockaddr_storage {
	short unsigned int ss_family;
	char __data[126];
};

struct rpc_procinfo {
	__u32 p_proc;
	const char *p_name;
};

struct rpc_message {
	const struct rpc_procinfo *rpc_proc;
};

struct rpc_clnt {
	__u32 cl_prog;
	__u32 cl_vers;
};

struct rpc_xprt {
	struct sockaddr_storage addr;
	int prot;
};

struct rpc_rqst {
	int rq_ntrans;
};

struct rpc_task {
	struct rpc_message tk_msg;
	struct rpc_clnt *tk_client;
	struct rpc_xprt *tk_xprt;
	struct rpc_rqst *tk_rqstp;
};

/* sunrpc:rpc_stats_latency; backlog, rtt and execute in microseconds. */
struct trace_event_raw_rpc_stats_latency {
	struct trace_entry ent;
	unsigned int task_id;
	unsigned int client_id;
	__u32 xid;
	int version;
	long unsigned int backlog;
	long unsigned int rtt;
	long unsigned int execute;
	__u32 __data_loc_progname;
	__u32 __data_loc_procname;
	__u32 __data_loc_addr;
	__u32 __data_loc_port;
};

#pragma clang attribute pop

#endif

/* common.h: what the disk and TCP programs share. */
#ifndef PLEXPORTER_COMMON_H
#define PLEXPORTER_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

/* MAX_BOUNDS is the most finite histogram bounds a program can hold; the
 * bucket after the last bound counts everything above it (+Inf). Keep it
 * equal to maxBounds in buckets.go. */
#define MAX_BOUNDS 32

/* bucket_index returns the index of the first bound not below v (the
 * classic histogram's `le` bucket v falls in, counted non-cumulatively), or
 * nr when v is above every bound. bounds is sorted ascending; the search is
 * binary so that its cost does not grow with the number of buckets:
 * log2(MAX_BOUNDS)+1 = 6 steps. */
static __always_inline __u32 bucket_index(const volatile __u64 *bounds, __u32 nr, __u64 v)
{
	__u32 lo = 0, hi = nr;
	if (hi > MAX_BOUNDS)
		hi = MAX_BOUNDS;
	for (int step = 0; step < 6; step++) {
		if (lo >= hi)
			break;
		__u32 mid = (lo + hi) / 2;
		if (mid >= MAX_BOUNDS)
			break;
		if (v <= bounds[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

/* Destination class bits: keep equal to the class constants in tcp.go. */
#define CLASS_NFS 1
#define CLASS_OBJECT_STORE 2
#define NR_CLASSES 2

/* An address as IPv6, IPv4 mapped (::ffff:a.b.c.d). */
struct addr {
	__u8 b[16];
};

static __always_inline void mapped_v4(struct addr *a, __be32 v4)
{
	__builtin_memset(a, 0, sizeof(*a));
	a->b[10] = 0xff;
	a->b[11] = 0xff;
	__builtin_memcpy(&a->b[12], &v4, 4);
}

#endif

/*
 * plexporter_collector.h — the C ABI of a plexporter shared-object collector.
 *
 * A collector is a shared object (gcc -shared -fPIC) that exports the five
 * functions below. The plexporter-so plugin loads one collector per plugin
 * instance with dlopen(3), inside that instance's own sandboxed process, and
 * relays what the collector emits to the host. A collector that crashes,
 * hangs or leaks costs that one process: the host restarts it like any
 * plugin. sdk/cabi/README.md explains the contract in prose; this header is
 * normative.
 *
 * Versioning. PLEXPORTER_COLLECTOR_ABI_VERSION is bumped for any change that
 * is not binary compatible (a struct layout, a function's signature or
 * meaning). plexporter-so loads only collectors whose
 * plexporter_collector_abi_version() returns the version it was built with,
 * and refuses others with an error naming the file and both versions.
 *
 * Threading. plexporter-so calls every function from one OS thread,
 * the same one for the life of the process, and never two at a time: no call
 * is concurrent with another, and collect is never re-entered. A collector
 * may start threads of its own (to sample in the background, say), but the
 * emitter's functions may only be called from the thread that is inside
 * collect, and only until collect returns. The calling thread has an 8 MiB
 * stack; threads the collector starts get 256 KiB unless it asks for more
 * with pthread_attr_setstacksize (plexporter-so lowers glibc's default so
 * that the Go runtime's threads do not fill its memory limit).
 *
 * Memory. Every pointer is owned by the side that made it:
 *   - what plexporter-so passes in (the config string, the emitter, ctx) is
 *     valid only during the call it is passed to; copy what you keep;
 *   - what a collector passes to the emitter (label values, buckets) is
 *     copied before the emitter function returns; reuse your buffers;
 *   - what a collector returns from info() is the collector's, read-only,
 *     and must stay valid until the process exits (static storage);
 *   - the one pointer that changes hands is configure()'s *error: the
 *     collector allocates it, plexporter-so frees it by passing it to
 *     plexporter_collector_free() exactly once.
 * Strings are NUL-terminated UTF-8.
 */
#ifndef PLEXPORTER_COLLECTOR_H
#define PLEXPORTER_COLLECTOR_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. */
#define PLEXPORTER_COLLECTOR_ABI_VERSION 1u

/* Symbols are exported with default visibility, so a collector built with
 * -fvisibility=hidden still exports its five functions. */
#define PLEXPORTER_COLLECTOR_EXPORT __attribute__((visibility("default")))

/* Metric types. Summaries are not supported: a collector that has
 * quantiles emits them as gauges with a quantile label. */
enum plexporter_metric_type {
	PLEXPORTER_COUNTER = 1,   /* name ends in _total; sample() */
	PLEXPORTER_GAUGE = 2,     /* sample() */
	PLEXPORTER_UNTYPED = 3,   /* sample() */
	PLEXPORTER_HISTOGRAM = 4, /* histogram() */
};

/* One metric family of the catalogue. */
struct plexporter_family {
	const char *name; /* Prometheus metric name, [a-zA-Z_:][a-zA-Z0-9_:]* */
	uint32_t type;    /* enum plexporter_metric_type */
	const char *help;
	const char *const *label_names; /* n_labels names, or NULL if none */
	uint32_t n_labels;
};

/* What a collector is. families[i] is family index i in the emitter. */
struct plexporter_collector_info {
	const char *name;    /* [a-z0-9_]+; labels the plugin's own error counter */
	const char *version; /* the collector's own version, free form */
	const struct plexporter_family *families;
	uint32_t n_families;
};

/* Values the emitter's sample() and histogram() return. */
enum plexporter_emit_result {
	PLEXPORTER_EMIT_OK = 0,       /* the sample was taken */
	PLEXPORTER_EMIT_REJECTED = 1, /* this sample was not (unknown family index,
	                                 wrong label count or type); it is counted
	                                 as a collection error; go on */
	PLEXPORTER_EMIT_STOP = 2,     /* the deadline has passed or the scrape was
	                                 abandoned: return from collect now; nothing
	                                 more is taken */
};

/*
 * The emitter: host-provided functions, each taking the ctx that collect()
 * received. Valid only inside collect() and only on its thread.
 */
struct plexporter_emitter {
	/* PLEXPORTER_COLLECTOR_ABI_VERSION of the plugin. */
	uint32_t abi_version;
	/* One counter, gauge or untyped sample of families[family]:
	 * label_values holds that family's n_labels values, in order. */
	int (*sample)(void *ctx, uint32_t family, const char *const *label_values,
	              uint32_t n_label_values, double value);
	/* One classic histogram of a PLEXPORTER_HISTOGRAM family:
	 * n_buckets finite upper bounds in strictly ascending order, each with
	 * the cumulative count of observations <= it; the +Inf bucket is count. */
	int (*histogram)(void *ctx, uint32_t family, const char *const *label_values,
	                 uint32_t n_label_values, const double *upper_bounds,
	                 const uint64_t *cumulative_counts, uint32_t n_buckets,
	                 uint64_t count, double sum);
	/* A partial failure: one source could not be read, the rest of the
	 * collect goes on. Each call counts one collection error and is reported
	 * to the host (identical messages once per collect). */
	void (*error)(void *ctx, const char *message);
};

/* --- The five functions a collector exports ----------------------------- */

/* A toolchain that writes its own prototypes for exported functions (Go's
 * cgo, whose generated ones lack const) defines
 * PLEXPORTER_COLLECTOR_NO_PROTOTYPES before including this header. */
#ifndef PLEXPORTER_COLLECTOR_NO_PROTOTYPES

/* Returns PLEXPORTER_COLLECTOR_ABI_VERSION as the collector was compiled.
 * Called first, before anything else. */
PLEXPORTER_COLLECTOR_EXPORT uint32_t plexporter_collector_abi_version(void);

/* Returns the collector's identity and catalogue (static storage, never
 * freed). Called once, after the version check. */
PLEXPORTER_COLLECTOR_EXPORT const struct plexporter_collector_info *plexporter_collector_info(void);

/* Applies the settings: config_json is a JSON object (the `collector` key of
 * the plugin's config; "{}" when absent). Called once, before any collect.
 * Returns 0, or non-zero when the settings cannot work: then *error may be
 * set to a message allocated by the collector, which plexporter-so frees
 * with plexporter_collector_free() and shows to the operator. */
PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *config_json, char **error);

/* One scrape: emit every sample through emit, with ctx as their first
 * argument, and return by deadline_ns (CLOCK_MONOTONIC, nanoseconds; see
 * plexporter_deadline_passed). Returns 0 when it completed (with or
 * without partial errors reported through emit->error), non-zero when it
 * failed as a whole; the samples emitted before are kept either way. A
 * collect that has not returned shortly after its deadline ends the
 * process: the host restarts it. */
PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns);

/* Frees what the collector allocated and handed over (configure's *error). */
PLEXPORTER_COLLECTOR_EXPORT void plexporter_collector_free(void *p);
#endif /* PLEXPORTER_COLLECTOR_NO_PROTOTYPES */

/* --- Helpers --------------------------------------------------------------- */

/* Whether a collect's deadline has passed. It needs POSIX clocks: under a
 * strict -std=c99 define _POSIX_C_SOURCE=200809L (gnu99 and later have them). */
#ifdef CLOCK_MONOTONIC
static inline int plexporter_deadline_passed(int64_t deadline_ns) {
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec >= deadline_ns;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* PLEXPORTER_COLLECTOR_H */

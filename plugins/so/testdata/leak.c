/* leak.c — allocates and touches {"mib": N} MiB (default 16) on every
 * collect and never frees it; it does not check malloc, as leaky code
 * seldom does, so the memory limit ends it with a crash. */
#include "common.h"

static const struct plexporter_family families[] = {
	{"leak_bytes", PLEXPORTER_GAUGE, "Bytes leaked so far.", NULL, 0},
};
static const struct plexporter_collector_info info = {"leak", "1.0.0", families, 1};

static long mib = 16;
static double leaked;
static void *chain; /* every block, so that none can be optimised away */

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *json, char **error) {
	(void)error;
	mib = setting(json, "\"mib\"", 16);
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns) {
	(void)deadline_ns;
	size_t n = (size_t)mib << 20;
	char *p = malloc(n);
	memset(p, 1, n);
	*(void **)p = chain;
	chain = p;
	leaked += (double)n;
	emit->sample(ctx, 0, NULL, 0, leaked);
	return 0;
}

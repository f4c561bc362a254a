/* segv.c — emits one sample, then dereferences NULL in the middle of its
 * collect. */
#include "common.h"

static const struct plexporter_family families[] = {
	{"segv_before_crash", PLEXPORTER_GAUGE, "Emitted just before the crash.", NULL, 0},
};
static const struct plexporter_collector_info info = {"segv", "1.0.0", families, 1};

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *json, char **error) {
	(void)json, (void)error;
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns) {
	(void)deadline_ns;
	emit->sample(ctx, 0, NULL, 0, 1);
	*(volatile int *)0 = 1;
	return 0;
}

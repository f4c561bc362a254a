/* hang.c — emits one sample, then never returns from collect, ignoring its
 * deadline and the emitter's STOP. */
#include <unistd.h>

#include "common.h"

static const struct plexporter_family families[] = {
	{"hang_before_hanging", PLEXPORTER_GAUGE, "Emitted before the collect hangs.", NULL, 0},
};
static const struct plexporter_collector_info info = {"hang", "1.0.0", families, 1};

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *json, char **error) {
	(void)json, (void)error;
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns) {
	(void)deadline_ns;
	emit->sample(ctx, 0, NULL, 0, 1);
	for (;;)
		sleep(1);
}

/* garbage.c — emits one good sample among garbage: an invalid family name,
 * the wrong label count, an unknown family index, a histogram on a gauge, a
 * NaN bucket bound, a 1 MiB label value and a label value that is not
 * UTF-8. */
#include <math.h>

#include "common.h"

static const char *const dev[] = {"device"};
enum { OK, BADNAME, HIST };
static const struct plexporter_family families[] = {
	[OK] = {"garbage_ok", PLEXPORTER_GAUGE, "The one good family.", dev, 1},
	[BADNAME] = {"0bad-name", PLEXPORTER_GAUGE, "Not a metric name.", NULL, 0},
	[HIST] = {"garbage_latency_seconds", PLEXPORTER_HISTOGRAM, "A histogram.", NULL, 0},
};
static const struct plexporter_collector_info info = {"garbage", "1.0.0", families, 3};

static char huge[1 << 20];

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *json, char **error) {
	(void)json, (void)error;
	memset(huge, 'x', sizeof huge - 1);
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns) {
	(void)deadline_ns;
	const char *good[] = {"sda"}, *big[] = {huge}, *notutf8[] = {"\xff\xfe"}, *two[] = {"a", "b"};
	emit->sample(ctx, OK, good, 1, 1);
	emit->sample(ctx, BADNAME, NULL, 0, 2);  /* the host's guard: invalid_name */
	emit->sample(ctx, OK, two, 2, 3);        /* the relay: wrong label count */
	emit->sample(ctx, 99, NULL, 0, 4);       /* the relay: no such family */
	emit->sample(ctx, HIST, NULL, 0, 5);     /* the relay: a histogram as a value */
	emit->sample(ctx, OK, big, 1, 6);        /* the host's guard: label value too long */
	emit->sample(ctx, OK, notutf8, 1, 7);    /* the host's guard: not UTF-8 */
	const double bounds[] = {NAN, 1};
	const uint64_t cumulative[] = {1, 2};
	emit->histogram(ctx, HIST, NULL, 0, bounds, cumulative, 2, 3, 1); /* the guard: invalid_histogram */
	return 0;
}

/* series.c — a well-behaved collector: {"series": N} gauges with two labels,
 * a counter of its collects and a histogram; {"fail": 1} makes configure
 * refuse with a message. The cost benchmark's C side. */
#include <stdio.h>

#include "common.h"

static const char *const series_labels[] = {"shard", "series"};
static const struct plexporter_family families[] = {
	{"test_series_value", PLEXPORTER_GAUGE, "One gauge per series.", series_labels, 2},
	{"test_collects_total", PLEXPORTER_COUNTER, "Collects so far.", NULL, 0},
	{"test_latency_seconds", PLEXPORTER_HISTOGRAM, "A fixed histogram.", NULL, 0},
};
static const struct plexporter_collector_info info = {"series", "1.0.0", families, 3};

static long series = 3;
static double collects;
static char (*names)[16]; /* series label values, made once */
static char shards[64][8];

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *json, char **error) {
	if (setting(json, "\"fail\"", 0)) {
		*error = strdup("series: refused as asked (\"fail\": 1)");
		return 1;
	}
	series = setting(json, "\"series\"", 3);
	if (series < 0 || series > 10000000) {
		*error = strdup("series: out of range");
		return 1;
	}
	names = calloc((size_t)series + 1, sizeof names[0]);
	if (!names) {
		*error = strdup("series: out of memory");
		return 1;
	}
	for (long i = 0; i < series; i++)
		snprintf(names[i], sizeof names[i], "s%d", (int)i);
	for (int i = 0; i < 64; i++)
		snprintf(shards[i], sizeof shards[i], "h%d", i);
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns) {
	(void)deadline_ns;
	for (long i = 0; i < series; i++) {
		const char *lv[2] = {shards[i % 64], names[i]};
		if (emit->sample(ctx, 0, lv, 2, (double)i) == PLEXPORTER_EMIT_STOP)
			return 1;
	}
	emit->sample(ctx, 1, NULL, 0, ++collects);
	const double bounds[] = {0.1, 1};
	const uint64_t cumulative[] = {1, 3};
	emit->histogram(ctx, 2, NULL, 0, bounds, cumulative, 2, 4, 2.5);
	return 0;
}

/*
 * loadavg.c — an example plexporter collector: the load averages and task
 * counts of /proc/loadavg, as four gauges.
 *
 *   gcc -shared -fPIC -O2 -Wall -I.. -o libplexporter_loadavg.so loadavg.c
 *
 * Settings (plugins.<name>.config.collector): {"path": "/proc/loadavg"},
 * the file to read (a container reads the node's at /host/proc/loadavg).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plexporter_collector.h"

static const char *const state_labels[] = {"state"};

enum { LOAD1, LOAD5, LOAD15, TASKS };

static const struct plexporter_family families[] = {
	[LOAD1] = {"loadavg_load1", PLEXPORTER_GAUGE, "1-minute load average.", NULL, 0},
	[LOAD5] = {"loadavg_load5", PLEXPORTER_GAUGE, "5-minute load average.", NULL, 0},
	[LOAD15] = {"loadavg_load15", PLEXPORTER_GAUGE, "15-minute load average.", NULL, 0},
	[TASKS] = {"loadavg_tasks", PLEXPORTER_GAUGE, "Scheduling entities (tasks) by state: runnable now, or existing.", state_labels, 1},
};

static const struct plexporter_collector_info info = {
	"loadavg", "1.0.0", families, sizeof families / sizeof families[0],
};

static char path[4096] = "/proc/loadavg";

PLEXPORTER_COLLECTOR_EXPORT uint32_t plexporter_collector_abi_version(void) {
	return PLEXPORTER_COLLECTOR_ABI_VERSION;
}

PLEXPORTER_COLLECTOR_EXPORT const struct plexporter_collector_info *plexporter_collector_info(void) {
	return &info;
}

/* A message for configure's *error, which plexporter-so frees. */
static char *message(const char *format, const char *arg) {
	size_t n = strlen(format) + strlen(arg) + 1;
	char *m = malloc(n);
	if (m)
		snprintf(m, n, format, arg);
	return m;
}

/* The settings are {} or {"path": "<file>"}. An example does not need a JSON
 * parser: anything else, escapes included, is refused with a message. */
PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_configure(const char *config_json, char **error) {
	const char *key = strstr(config_json, "\"path\"");
	if (!key) {
		if (strspn(config_json, "{} \t\n") != strlen(config_json)) {
			*error = message("collector settings %s: only the key \"path\" is known", config_json);
			return 1;
		}
		return 0;
	}
	const char *start = strchr(key + 6, '"');
	const char *end = start ? strchr(start + 1, '"') : NULL;
	if (!start || !end || memchr(start, '\\', end - start) || end - start - 1 >= (long)sizeof path || start[1] != '/') {
		*error = message("collector settings %s: path must be an absolute file name without escapes", config_json);
		return 1;
	}
	memcpy(path, start + 1, end - start - 1);
	path[end - start - 1] = 0;
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT int plexporter_collector_collect(const struct plexporter_emitter *emit, void *ctx,
                                                             int64_t deadline_ns) {
	(void)deadline_ns; /* one small read */
	FILE *f = fopen(path, "re");
	if (!f) {
		char m[4200];
		snprintf(m, sizeof m, "open %s: %s", path, strerror(errno));
		emit->error(ctx, m);
		return 0; /* a partial failure: the collect itself went fine */
	}
	double l1, l5, l15;
	unsigned long running, total;
	int n = fscanf(f, "%lf %lf %lf %lu/%lu", &l1, &l5, &l15, &running, &total);
	fclose(f);
	if (n != 5) {
		char m[4200];
		snprintf(m, sizeof m, "parse %s: want \"<1m> <5m> <15m> <running>/<total> ...\"", path);
		emit->error(ctx, m);
		return 0;
	}
	emit->sample(ctx, LOAD1, NULL, 0, l1);
	emit->sample(ctx, LOAD5, NULL, 0, l5);
	emit->sample(ctx, LOAD15, NULL, 0, l15);
	const char *runnable[] = {"runnable"}, *all[] = {"all"};
	emit->sample(ctx, TASKS, runnable, 1, (double)running);
	emit->sample(ctx, TASKS, all, 1, (double)total);
	return 0;
}

PLEXPORTER_COLLECTOR_EXPORT void plexporter_collector_free(void *p) {
	free(p);
}

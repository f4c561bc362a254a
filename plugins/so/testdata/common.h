/* common.h — the boilerplate of the test collectors: the ABI version, info,
 * an integer setting read from the config JSON, and free. */
#include <stdlib.h>
#include <string.h>

#include "plexporter_collector.h"

static const struct plexporter_collector_info info;

PLEXPORTER_COLLECTOR_EXPORT uint32_t plexporter_collector_abi_version(void) {
#ifdef TEST_ABI_VERSION
	return TEST_ABI_VERSION;
#else
	return PLEXPORTER_COLLECTOR_ABI_VERSION;
#endif
}

PLEXPORTER_COLLECTOR_EXPORT const struct plexporter_collector_info *plexporter_collector_info(void) {
	return &info;
}

PLEXPORTER_COLLECTOR_EXPORT void plexporter_collector_free(void *p) {
	free(p);
}

/* setting returns the integer value of "key" in json, or def. */
__attribute__((unused)) static long setting(const char *json, const char *key, long def) {
	const char *k = strstr(json, key);
	if (!k)
		return def;
	k = strchr(k + strlen(key), ':');
	return k ? strtol(k + 1, NULL, 10) : def;
}

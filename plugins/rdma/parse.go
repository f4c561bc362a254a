package main

import (
	"strconv"
	"strings"
)

var portStateNames = map[int]string{0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}

var physStateNames = map[int]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION_TRAINING",
	5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY_TEST"}

// normalizeState turns "4: ACTIVE" / "5: LinkUp" into the ib_verbs enum
// name rdma_exporter exports (ACTIVE, LINK_UP). Unknown numbers keep the
// kernel's text after the colon.
func normalizeState(raw string, names map[int]string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	num, rest, found := strings.Cut(raw, ":")
	if n, err := strconv.Atoi(strings.TrimSpace(num)); err == nil {
		if name, ok := names[n]; ok {
			return name
		}
	}
	if found {
		return strings.TrimSpace(rest)
	}
	return raw
}

// parseRate splits sysfs "rate" ("200 Gb/sec (4X HDR)") into the speed
// ("200 Gb/sec") and the width ("4X").
func parseRate(raw string) (speed, width string) {
	raw = strings.TrimSpace(raw)
	speed = raw
	if i := strings.Index(raw, "("); i >= 0 {
		speed = strings.TrimSpace(raw[:i])
		inner := strings.TrimSuffix(raw[i+1:], ")")
		if f := strings.Fields(inner); len(f) > 0 && strings.HasSuffix(f[0], "X") {
			width = f[0]
		}
	}
	return speed, width
}

package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errNoPMA marks the "N/A (no PMA)" text a device without a PMA prints in
// every counters/ file: not a failure, the counter simply does not exist.
var errNoPMA = errors.New("N/A (no PMA)")

// parseCounter parses one sysfs counter file: an unsigned decimal number
// followed by at most one newline. Anything else (empty, garbage, binary,
// signs, hex, values beyond 2^64-1) is an error.
func parseCounter(b []byte) (uint64, error) {
	s := string(b)
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return 0, errors.New("empty counter file")
	}
	if strings.HasPrefix(s, "N/A") {
		return 0, errNoPMA
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("not an unsigned decimal: %q", truncate(s, 32))
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter out of range: %q", truncate(s, 32))
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

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

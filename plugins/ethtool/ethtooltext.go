package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// The captured driver statistics in testdata/ are kept as `ethtool -S`
// prints them, readable in a diff; the tests and the demo build
// (main_demo.go) serve them through this parser as the ioctl would.

// parseEthtoolText parses `ethtool -S` output (optional "NIC statistics:"
// header, then "name: value" lines) into the table the ioctl would return.
func parseEthtoolText(text string) (*driverStats, error) {
	st := &driverStats{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasSuffix(line, "statistics:") {
			continue
		}
		i := strings.LastIndex(line, ": ")
		if i < 0 {
			return nil, fmt.Errorf("line %q: no \": \"", line)
		}
		v, err := strconv.ParseUint(line[i+2:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		st.Names = append(st.Names, line[:i])
		st.Values = append(st.Values, v)
	}
	return st, sc.Err()
}

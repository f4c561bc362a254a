package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// driverStats is one netdev's `ethtool -S` table: names and values in the
// driver's order. Names may repeat for some drivers; consumers keep the first.
type driverStats struct {
	Driver string
	Names  []string
	Values []uint64
}

// statsSource reads driver statistics of a netdev. The ioctl source
// (ioctl_linux.go) implements it on a host; tests feed fixtures through the
// same interface.
type statsSource interface {
	DriverStats(ctx context.Context, netdev string) (*driverStats, error)
}

// errNoStats means the netdev has no driver statistics (EOPNOTSUPP, or a
// count of zero, as for bridges): that is "no series", not a failure.
var errNoStats = errors.New("no driver statistics")

// ethGStringLen is ETH_GSTRING_LEN: every name in a string table is a
// NUL-padded 32-byte slot.
const ethGStringLen = 32

// decodeGStrings decodes a struct ethtool_gstrings buffer (u32 cmd, u32
// string_set, u32 len, len × 32-byte names) as the kernel fills it.
func decodeGStrings(buf []byte) ([]string, error) {
	if len(buf) < 12 {
		return nil, fmt.Errorf("string table: %d bytes, shorter than its 12-byte header", len(buf))
	}
	n := binary.NativeEndian.Uint32(buf[8:12])
	if uint64(n)*ethGStringLen > uint64(len(buf)-12) {
		return nil, fmt.Errorf("string table: header says %d names but the buffer holds %d", n, (len(buf)-12)/ethGStringLen)
	}
	names := make([]string, n)
	for i := range names {
		slot := buf[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		end := 0
		for end < len(slot) && slot[end] != 0 {
			end++
		}
		names[i] = string(slot[:end])
	}
	return names, nil
}

// decodeGStats decodes a struct ethtool_stats buffer (u32 cmd, u32 n_stats,
// n_stats × u64).
func decodeGStats(buf []byte) ([]uint64, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("stats: %d bytes, shorter than the 8-byte header", len(buf))
	}
	n := binary.NativeEndian.Uint32(buf[4:8])
	if uint64(n)*8 > uint64(len(buf)-8) {
		return nil, fmt.Errorf("stats: header says %d values but the buffer holds %d", n, (len(buf)-8)/8)
	}
	vals := make([]uint64, n)
	for i := range vals {
		vals[i] = binary.NativeEndian.Uint64(buf[8+i*8:])
	}
	return vals, nil
}

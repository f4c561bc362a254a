package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The attribute numbers agree with golang.org/x/sys/unix where it has them.
func TestUAPINumbers(t *testing.T) {
	for _, c := range []struct{ ours, unix int }{
		{msgStatsGet, unix.ETHTOOL_MSG_STATS_GET},
		{msgStatsGetReply, unix.ETHTOOL_MSG_STATS_GET_REPLY},
		{msgPauseGet, unix.ETHTOOL_MSG_PAUSE_GET},
		{msgPauseGetReply, unix.ETHTOOL_MSG_PAUSE_GET_REPLY},
		{msgFECGet, unix.ETHTOOL_MSG_FEC_GET},
		{msgFECGetReply, unix.ETHTOOL_MSG_FEC_GET_REPLY},
		{aHeaderDevName, unix.ETHTOOL_A_HEADER_DEV_NAME},
		{aHeaderFlags, unix.ETHTOOL_A_HEADER_FLAGS},
		{flagStats, unix.ETHTOOL_FLAG_STATS},
		{flagCompactBitsets, unix.ETHTOOL_FLAG_COMPACT_BITSETS},
		{aPauseStats, unix.ETHTOOL_A_PAUSE_STATS},
		{aPauseStatTxFrames, unix.ETHTOOL_A_PAUSE_STAT_TX_FRAMES},
		{aPauseStatRxFrames, unix.ETHTOOL_A_PAUSE_STAT_RX_FRAMES},
	} {
		if c.ours != c.unix {
			t.Errorf("%d != %d", c.ours, c.unix)
		}
	}
	if ethtoolGenlName != unix.ETHTOOL_GENL_NAME {
		t.Error(unix.ETHTOOL_GENL_NAME)
	}
}

//go:build !demo

// Command plexporter-ethtool exports NIC hardware counters read through the
// SIOCETHTOOL ioctl: rdma_exporter-compatible families for the netdevs of
// RDMA Ethernet ports, and (opt-in) every driver statistic of selected NICs;
// plus the kernel's standard statistics (IEEE 802.3 / RMON groups, pause and
// FEC counters) of selected NICs through ethtool netlink.
package main

import (
	"runtime"

	"github.com/plexporter/plexporter/sdk"
)

func main() {
	// A collect is a sequence of short ioctls and netlink requests: a
	// second P only makes the runtime wake a second thread for the gRPC
	// send and the garbage collector, which costs more CPU than it saves
	// (docs/performance.md, scenario 7: 2.9 -> 2.4 ms of plugin CPU per
	// scrape of 64 netdevs).
	runtime.GOMAXPROCS(1)
	sdk.Serve(newPlugin())
}

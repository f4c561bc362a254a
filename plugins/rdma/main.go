//go:build !demo

// Command plexporter-rdma is the plexporter plugin for RDMA port counters
// (sysfs and RDMA netlink), a drop-in for rdma_exporter's metric names.
package main

import (
	"runtime"

	"github.com/plexporter/plexporter/sdk"
)

func main() {
	// A collect is a few thousand short sysfs reads: with a second P the
	// runtime wakes a second thread to share them, and the wakeups cost
	// more CPU than the work they share (docs/performance.md, scenario 2:
	// 2.6 -> 2.2 ms of plugin CPU per collect). Devices are still read in
	// parallel where it matters: a read that blocks in the driver (a
	// firmware query behind hw_counters/) hands its P to another thread.
	runtime.GOMAXPROCS(1)
	sdk.Serve(newPlugin())
}

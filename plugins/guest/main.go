//go:build !demo

// Command plexporter-guest is the plexporter plugin for a cloud VM's view of
// its own health, what the hypervisor's metrics cannot see: CPU steal and
// run queue (<procfs>/stat), pressure stall information (<procfs>/pressure),
// available memory and swap (<procfs>/meminfo), whole-disk I/O
// (<procfs>/diskstats) and filesystem usage (statfs on the mounts of
// <procfs>/self/mountinfo), and the kernel watchdog's soft-lockup reports
// (a tailer of /dev/kmsg). See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }

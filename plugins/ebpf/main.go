// Command plexporter-ebpf is the plexporter plugin for kernel-level
// latency and retransmission statistics gathered by eBPF programs: block
// request latency histograms per disk, and TCP retransmissions per watched
// destination (NFS servers, object-store endpoints). See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }

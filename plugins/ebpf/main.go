// Command plexporter-ebpf is the plexporter plugin for kernel-level
// latency and retransmission statistics gathered by eBPF programs: block
// request latency histograms per disk, and TCP retransmissions per watched
// destination (NFS servers, object-store endpoints). See README.md.
//
// Unlike the other plugins it serves shipped(), not newPlugin(): the
// plugin whose program loading is sealed once set up (seal.go).
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(shipped()) }

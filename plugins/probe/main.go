//go:build !demo

// Command plexporter-probe is the plexporter plugin for active health probes
// from the node: an ICMP echo to configured hosts, an NFS NULL RPC to every
// NFS server of the node's mount table (<procfs>/self/mountinfo) and an
// HTTPS GET to configured endpoints (object stores), each round on an
// interval from a background goroutine. These probes were the guest
// plugin's; they are a plugin of their own so that guest's sandbox never
// needs network. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }

//go:build !demo

// Command plexporter-rdma is the plexporter plugin for RDMA port counters
// (sysfs and RDMA netlink), a drop-in for rdma_exporter's metric names.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }

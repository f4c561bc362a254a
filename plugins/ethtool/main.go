//go:build !demo

// Command plexporter-ethtool exports NIC hardware counters read through the
// SIOCETHTOOL ioctl: rdma_exporter-compatible families for the netdevs of
// RDMA Ethernet ports, and (opt-in) every driver statistic of selected NICs;
// plus the kernel's standard statistics (IEEE 802.3 / RMON groups, pause and
// FEC counters) of selected NICs through ethtool netlink.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }

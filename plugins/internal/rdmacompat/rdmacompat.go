// Package rdmacompat holds the rdma_exporter families that more than one
// plugin writes. rdma_exporter was one process with sysfs, netlink and
// ethtool sub-collectors; plexporter splits them over the rdma and ethtool
// plugins, and the host merges a family written by two plugins only when
// its type, help and labels agree, so both plugins use these descriptors.
package rdmacompat

import "github.com/plexporter/plexporter/sdk"

// CollectorSuccess is rdma_exporter's per-sub-collector success gauge. The
// rdma plugin writes collector="sysfs", "optional-counters" and
// "qp-counters"; the ethtool plugin writes collector="ethtool".
var CollectorSuccess = sdk.NewDesc("rdma_scrape_collector_success", sdk.Gauge,
	"1 if the sub-collector (sysfs, optional-counters, qp-counters from the rdma plugin; ethtool from the ethtool plugin) could run in this scrape, 0 otherwise; absent when disabled.",
	"collector").WithShared() // the catalogues of both declare it shared, or the host would keep it to the first

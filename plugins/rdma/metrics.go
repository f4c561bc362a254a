package main

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/plexporter/plexporter/plugins/internal/rdmacompat"
	"github.com/plexporter/plexporter/sdk"
)

// Static families. Names, types and label sets are rdma_exporter's.
var (
	descPortInfo = sdk.NewDesc("rdma_port_info", sdk.Gauge,
		"RDMA port metadata exported as labels (value is always 1).",
		"device", "port", "netdev", "link_layer", "state", "phys_state", "link_width", "link_speed", "pci_addr", "is_vf", "pf_device")
	// node_exporter's node_infiniband_info, with the node GUID.
	descDeviceInfo = sdk.NewDesc("rdma_device_info", sdk.Gauge,
		"RDMA device identity exported as labels (value is always 1): board_id, fw_ver, hca_type and node_guid of the device directory, empty where the driver has no such file.",
		"device", "board_id", "firmware_version", "hca_type", "node_guid")
	descLifespan = sdk.NewDesc("rdma_lifespan_milliseconds", sdk.Gauge,
		"Cache lifetime of the port's hw_counters in milliseconds (sysfs hw_counters/lifespan); a setting, not a counter.",
		"device", "port").WithUnit("milliseconds")
	descScrapeErrors = sdk.NewDesc("rdma_scrape_errors_total", sdk.Counter,
		"Errors while reading RDMA sysfs since the plugin started (each skipped counter file counts once per scrape).")
	// Shared with the ethtool plugin (collector="ethtool").
	descCollectorSuccess = rdmacompat.CollectorSuccess

	descOptionalEnabled = sdk.NewDesc("rdma_optional_counter_enabled", sdk.Gauge,
		"1 if the optional RDMA hardware counter is enabled on the port, 0 if supported but disabled. The plugin never enables counters.",
		"device", "port", "counter")
	descOptionalErrors = sdk.NewDesc("rdma_optional_counter_scrape_errors_total", sdk.Counter,
		"Errors while reading optional RDMA counters over RDMA netlink, including an enabled counter without a value in the same scrape.")

	descQPMode = sdk.NewDesc("rdma_qp_counter_mode", sdk.Gauge,
		"QP statistic counter bind mode of the port; one series per mode (none, auto, manual), 1 for the current one.",
		"device", "port", "mode")
	descQPAutoMask = sdk.NewDesc("rdma_qp_auto_mask", sdk.Gauge,
		"1 if the auto-mode grouping of the port includes the criterion (type, pid).",
		"device", "port", "criteria")
	descQPScrapeStatus = sdk.NewDesc("rdma_qp_scrape_status", sdk.Gauge,
		"Result of this scrape's QP counter dump for the port (ok, overflow, error); absent when the dump is skipped.",
		"device", "port", "result")
	descQPErrors = sdk.NewDesc("rdma_qp_scrape_errors_total", sdk.Counter,
		"Errors while reading QP counters over RDMA netlink, including dump overflow.")
)

// Optional counters whose values are exported, and the family they go to.
var optionalValueNames = map[string]string{
	"cc_rx_ce_pkts":   "rdma_cc_rx_ce_pkts_total",
	"cc_rx_cnp_pkts":  "rdma_cc_rx_cnp_pkts_total",
	"cc_tx_cnp_pkts":  "rdma_cc_tx_cnp_pkts_total",
	"rdma_rx_bytes":   "rdma_optional_rx_bytes_total",
	"rdma_tx_bytes":   "rdma_optional_tx_bytes_total",
	"rdma_rx_packets": "rdma_optional_rx_packets_total",
	"rdma_tx_packets": "rdma_optional_tx_packets_total",
}

var optionalDescs = func() map[string]*sdk.Desc {
	m := map[string]*sdk.Desc{}
	for counter, name := range optionalValueNames {
		m[counter] = sdk.NewDesc(name, sdk.Counter,
			fmt.Sprintf("Optional RDMA hardware counter %s read over RDMA netlink (only while enabled by the operator).", counter),
			"device", "port")
	}
	return m
}()

// QP counter names aggregated per QP type (dump keys, rdma_exporter's list).
var qpValueNames = []string{
	"duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "packet_seq_err",
	"rnr_nak_retry_err", "out_of_buffer", "rx_write_requests", "rx_read_requests",
	"rx_atomic_requests", "rdma_rx_bytes", "rdma_tx_bytes", "rdma_rx_packets", "rdma_tx_packets",
}

var qpDescs = func() map[string]*sdk.Desc {
	m := map[string]*sdk.Desc{}
	for _, n := range qpValueNames {
		m[n] = sdk.NewDesc("rdma_qp_"+strings.TrimPrefix(n, "rdma_")+"_total", sdk.Counter,
			"Sum over live auto-type bound QP counters of this QP type on the port (do not add to the port-level rdma_<name>_total, which already includes them).",
			"device", "port", "qp_type")
	}
	return m
}()

// descKernelCounters stands in the catalogue for the families named after
// the kernel's counter files; samples go to counterDescs.
var descKernelCounters = sdk.NewDesc("rdma_*_total", sdk.Counter,
	"One counter per file in ports/<n>/counters/ and ports/<n>/hw_counters/, named as the kernel names it (raw kernel values); where ports/<n>/counters_ext/ exists (kernels before 4.5, mlx4) its 64-bit values replace the 32-bit counters/ ones.", "device", "port")

// catalogue is every family the plugin writes, as Info returns it.
var catalogue = func() []*sdk.Desc {
	d := []*sdk.Desc{descPortInfo, descDeviceInfo, descLifespan, descScrapeErrors, descCollectorSuccess,
		descOptionalEnabled, descOptionalErrors, descQPMode, descQPAutoMask, descQPScrapeStatus, descQPErrors}
	for _, n := range []string{"cc_rx_ce_pkts", "cc_rx_cnp_pkts", "cc_tx_cnp_pkts", "rdma_rx_bytes", "rdma_tx_bytes", "rdma_rx_packets", "rdma_tx_packets"} {
		d = append(d, optionalDescs[n])
	}
	for _, n := range qpValueNames {
		d = append(d, qpDescs[n])
	}
	return append(d, descKernelCounters)
}()

// counterDescs hands out one Desc per kernel counter name, created on first
// sight and reused (the Writer keys its state by the pointer).
type counterDescs struct {
	mu     sync.Mutex
	byRaw  map[string]*sdk.Desc
	owners map[string]string // metric name -> raw counter name that owns it
}

func newCounterDescs() *counterDescs {
	return &counterDescs{byRaw: map[string]*sdk.Desc{}, owners: map[string]string{}}
}

func (c *counterDescs) get(raw string) *sdk.Desc {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byRaw[raw]; ok {
		return d
	}
	base := sanitizeName(raw)
	name := "rdma_" + base + "_total"
	if owner, taken := c.owners[name]; taken && owner != raw {
		// Two kernel names that sanitise alike (e.g. "a-b" and "a_b"):
		// keep both apart the way rdma_exporter does, with an FNV-32a suffix.
		h := fnv.New32a()
		h.Write([]byte(raw))
		name = fmt.Sprintf("rdma_%s_%x_total", base, h.Sum32())
	}
	c.owners[name] = raw
	d := sdk.NewDesc(name, sdk.Counter,
		fmt.Sprintf("RDMA port counter %q as the kernel reports it (sysfs ports/<n>/counters or hw_counters).", raw),
		"device", "port")
	c.byRaw[raw] = d
	return d
}

// sanitizeName maps a kernel counter name to a metric name fragment:
// lower case, [a-z0-9_] only, never starting with a digit.
func sanitizeName(s string) string {
	if s == "" {
		return "unknown"
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r == '_':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

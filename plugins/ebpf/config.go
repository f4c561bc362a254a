package main

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
)

// Attach modes (the attach label of ebpf_program_loaded).
const (
	attachTPBTF      = "tp_btf"
	attachRawTP      = "raw_tp"
	attachTracepoint = "tracepoint"
	attachFentry     = "fentry"
	attachKprobe     = "kprobe"
)

// attachOrder is the order auto tries a group's modes in: the tracepoints
// (stable kernel ABI; raw_tp, where a group has it, before the classic
// ones: cheaper, and no tracefs privilege), then the functions behind
// them, fentry/fexit before kprobes (cheaper, and typed by BTF). A group
// tries the modes it has.
var attachOrder = []string{attachTPBTF, attachRawTP, attachTracepoint, attachFentry, attachKprobe}

// groupVariants are the program groups by name (the keys of group_attach,
// the group label of the plugin's log lines) and the modes each has.
var groupVariants = map[string]map[string]variant{
	"disk":                     diskVariants,
	"tcp_retransmits":          tcpVariants,
	"object_store_connections": connVariants,
	collectorRTT:               rttVariants,
	collectorNFSLatency:        nfsVariants,
}

// config is the plugin's section of the host configuration
// (plugins.ebpf.config); the json tags are its keys.
type config struct {
	// Attach is auto (each group's modes in attachOrder), tp_btf or
	// tracepoint (the modes every group has): what every group tries.
	Attach string `json:"attach"`
	// GroupAttach overrides Attach for single groups: group name to auto
	// or one of the modes the group has (fentry and kprobe only where a
	// group has them).
	GroupAttach map[string]string `json:"group_attach"`
	// Disk and TCPRetransmits switch the two program groups on or off.
	Disk                   *bool `json:"disk"`
	TCPRetransmits         *bool `json:"tcp_retransmits"`
	ObjectStoreConnections *bool `json:"object_store_connections"`
	// DiskLatencyBuckets overrides the latency histograms' bounds, in
	// seconds.
	DiskLatencyBuckets []float64 `json:"disk_latency_buckets"`
	// ObjectStoreLatencyBuckets overrides the connection latency
	// histogram's bounds, in seconds.
	ObjectStoreLatencyBuckets []float64 `json:"object_store_latency_buckets"`
	// NFSLatency switches the NFS per-operation latency programs: unset,
	// they load once an NFS file system is mounted (nfsgroup.go).
	NFSLatency *bool `json:"nfs_latency"`
	// NFSLatencyBuckets overrides the NFS latency histogram's bounds, in
	// seconds.
	NFSLatencyBuckets []float64 `json:"nfs_latency_buckets"`
	// TCPRTT switches on the smoothed-RTT programs (off by default: they
	// run on every received TCP segment of the node).
	TCPRTT *bool `json:"tcp_rtt"`
	// TCPRTTBuckets overrides the RTT histograms' bounds, in seconds.
	TCPRTTBuckets []float64 `json:"tcp_rtt_buckets"`
	// NativeHistograms writes each latency histogram whose bounds are
	// schema 0 buckets (the disk and object-store defaults) as a native
	// histogram too, beside its classic buckets (native.go); default true.
	NativeHistograms *bool `json:"native_histograms"`
	// NFSVolumeIDRegex derives volume_id from an NFS export path, as the
	// nfs plugin's volume_id_regex does (keep the two equal).
	NFSVolumeIDRegex string `json:"nfs_volume_id_regex"`
	// TracefsPath is where classic tracepoints' ids are read; defaults to
	// <sysfs>/kernel/tracing.
	TracefsPath string `json:"tracefs_path"`
	// NFSServers overrides the NFS servers detected from <procfs>/self/mounts.
	NFSServers []string `json:"nfs_servers"`
	NFSPorts   []uint16 `json:"nfs_ports"`
	// ObjectStoreEndpoints are IP addresses or host names (resolved to at
	// most maxEndpointAddrs addresses each).
	ObjectStoreEndpoints []string `json:"object_store_endpoints"`
	ObjectStorePorts     []uint16 `json:"object_store_ports"`
	// RefreshInterval is how often the NFS servers are detected again and
	// the endpoints resolved again.
	RefreshInterval model.Duration `json:"refresh_interval"`
	// MaxDestinations bounds the destinations whose retransmissions are
	// counted at once (the LRU map's size).
	MaxDestinations int `json:"max_destinations"`

	nfsServers  []netip.Addr     // parsed NFSServers
	bounds      []float64        // DiskLatencyBuckets or the defaults
	connBounds  []float64        // ObjectStoreLatencyBuckets or the defaults
	nfsBounds   []float64        // NFSLatencyBuckets or the defaults
	rttBounds   []float64        // TCPRTTBuckets or the defaults
	volumeNamer *nfsvolume.Namer // NFSVolumeIDRegex compiled
}

const (
	minRefresh         = time.Second
	maxDestinationsCap = 65536
)

func defaultConfig() config {
	return config{
		Attach:           "auto",
		NFSPorts:         []uint16{2049},
		ObjectStorePorts: []uint16{443, 80},
		RefreshInterval:  model.Duration(60 * time.Second),
		MaxDestinations:  1024,
		NFSVolumeIDRegex: nfsvolume.DefaultRegex,
	}
}

// NFS latency modes (config.nfsLatencyMode).
const (
	nfsLatencyAuto = iota // once an NFS file system is mounted
	nfsLatencyOn
	nfsLatencyOff
)

func (c *config) nfsLatencyMode() int {
	switch {
	case c.NFSLatency == nil:
		return nfsLatencyAuto
	case *c.NFSLatency:
		return nfsLatencyOn
	}
	return nfsLatencyOff
}

func (c *config) diskEnabled() bool { return c.Disk == nil || *c.Disk }
func (c *config) tcpEnabled() bool  { return c.TCPRetransmits == nil || *c.TCPRetransmits }
func (c *config) rttEnabled() bool  { return c.TCPRTT != nil && *c.TCPRTT }

// connEnabled: the connection programs run on every socket send and
// receive of the node, so by default only when there is an endpoint to
// watch.
func (c *config) connEnabled() bool {
	if c.ObjectStoreConnections != nil {
		return *c.ObjectStoreConnections
	}
	return len(c.ObjectStoreEndpoints) > 0
}

func (c *config) nativeHistograms() bool { return c.NativeHistograms == nil || *c.NativeHistograms }

// attachVariants are the variants group tries, in order: the one its
// group_attach or attach names, else every mode it has in attachOrder.
func (c *config) attachVariants(group string) []variant {
	variants := groupVariants[group]
	mode := c.GroupAttach[group]
	if mode == "" || mode == "auto" {
		mode = c.Attach
	}
	if v, ok := variants[mode]; ok {
		return []variant{v}
	}
	var out []variant
	for _, m := range attachOrder {
		if v, ok := variants[m]; ok {
			out = append(out, v)
		}
	}
	return out
}

// validate checks the settings, naming the key of the first bad one.
func (c *config) validate() error {
	// attach applies to every group: only the modes every group has.
	if !slices.Contains([]string{"auto", attachTPBTF, attachTracepoint}, c.Attach) {
		return fmt.Errorf("attach: %q is not one of auto, tp_btf, tracepoint (fentry and kprobe are per group: group_attach)", c.Attach)
	}
	for group, mode := range c.GroupAttach {
		variants, ok := groupVariants[group]
		if !ok {
			return fmt.Errorf("group_attach: %q is not a program group (%s)", group, strings.Join(slices.Sorted(maps.Keys(groupVariants)), ", "))
		}
		modes := []string{"auto"}
		for _, m := range attachOrder {
			if _, ok := variants[m]; ok {
				modes = append(modes, m)
			}
		}
		if !slices.Contains(modes, mode) {
			return fmt.Errorf("group_attach.%s: %q is not one of %s", group, mode, strings.Join(modes, ", "))
		}
	}
	c.bounds = defaultBounds()
	if c.DiskLatencyBuckets != nil {
		if err := validateBounds("disk_latency_buckets", c.DiskLatencyBuckets); err != nil {
			return err
		}
		c.bounds = c.DiskLatencyBuckets
	}
	c.connBounds = defaultConnBounds()
	if c.ObjectStoreLatencyBuckets != nil {
		if err := validateBounds("object_store_latency_buckets", c.ObjectStoreLatencyBuckets); err != nil {
			return err
		}
		c.connBounds = c.ObjectStoreLatencyBuckets
	}
	c.rttBounds = defaultRTTBounds()
	if c.TCPRTTBuckets != nil {
		if err := validateBounds("tcp_rtt_buckets", c.TCPRTTBuckets); err != nil {
			return err
		}
		c.rttBounds = c.TCPRTTBuckets
	}
	c.nfsBounds = defaultNFSBounds()
	if c.NFSLatencyBuckets != nil {
		if err := validateBounds("nfs_latency_buckets", c.NFSLatencyBuckets); err != nil {
			return err
		}
		c.nfsBounds = c.NFSLatencyBuckets
	}
	namer, err := nfsvolume.New(c.NFSVolumeIDRegex)
	if err != nil {
		return fmt.Errorf("nfs_volume_id_regex: %w", err)
	}
	c.volumeNamer = namer
	c.nfsServers = nil
	for i, s := range c.NFSServers {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("nfs_servers[%d]: %q is not an IP address", i, s)
		}
		c.nfsServers = append(c.nfsServers, a.Unmap())
	}
	if err := validatePorts("nfs_ports", c.NFSPorts); err != nil {
		return err
	}
	if err := validatePorts("object_store_ports", c.ObjectStorePorts); err != nil {
		return err
	}
	for i, e := range c.ObjectStoreEndpoints {
		if err := validateEndpoint(e); err != nil {
			return fmt.Errorf("object_store_endpoints[%d]: %w", i, err)
		}
	}
	if len(c.ObjectStoreEndpoints) > maxEndpoints {
		return fmt.Errorf("object_store_endpoints: %d endpoints, at most %d are supported", len(c.ObjectStoreEndpoints), maxEndpoints)
	}
	if time.Duration(c.RefreshInterval) < minRefresh {
		return fmt.Errorf("refresh_interval: %v is below the minimum of %v", c.RefreshInterval, model.Duration(minRefresh))
	}
	if c.MaxDestinations < 1 || c.MaxDestinations > maxDestinationsCap {
		return fmt.Errorf("max_destinations: %d is not between 1 and %d", c.MaxDestinations, maxDestinationsCap)
	}
	return nil
}

func validatePorts(key string, ports []uint16) error {
	if len(ports) > maxPorts {
		return fmt.Errorf("%s: %d ports, at most %d are supported", key, len(ports), maxPorts)
	}
	for i, p := range ports {
		if p == 0 {
			return fmt.Errorf("%s[%d]: 0 is not a port", key, i)
		}
	}
	return nil
}

// validateEndpoint accepts an IP address or a DNS host name.
func validateEndpoint(e string) error {
	if _, err := netip.ParseAddr(e); err == nil {
		return nil
	}
	if e == "" || len(e) > 253 {
		return fmt.Errorf("%q is neither an IP address nor a host name", e)
	}
	for _, label := range strings.Split(strings.TrimSuffix(e, "."), ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return fmt.Errorf("%q is neither an IP address nor a host name", e)
		}
		for _, r := range label {
			if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return fmt.Errorf("%q is neither an IP address nor a host name", e)
			}
		}
	}
	return nil
}

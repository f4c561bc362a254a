package main

import "github.com/plexporter/plexporter/sdk"

// Label names.
const (
	lDevice    = "device"
	lProgram   = "program"
	lAttach    = "attach"
	lCollector = "collector"
	lServer    = "server"
	lEndpoint  = "endpoint"
	lReason    = "reason"
)

// Disk, per device (the kernel's name for the whole disk), from the block
// request programs. The latency total is the histograms' _sum: a counter
// disk_read_latency_seconds_total beside the histogram would expose the same
// _created series name in OpenMetrics, which the host's guard refuses.
var (
	descDiskReads      = sdk.NewDesc("disk_reads_completed_total", sdk.Counter, "Read requests completed.", lDevice)
	descDiskWrites     = sdk.NewDesc("disk_writes_completed_total", sdk.Counter, "Write requests completed.", lDevice)
	descDiskReadBytes  = sdk.NewDesc("disk_read_bytes_total", sdk.Counter, "Bytes read by completed requests.", lDevice).WithUnit("bytes")
	descDiskWriteBytes = sdk.NewDesc("disk_write_bytes_total", sdk.Counter, "Bytes written by completed requests.", lDevice).WithUnit("bytes")
	descDiskReadHist   = sdk.NewDesc("disk_read_latency_seconds", sdk.Histogram, "Read request latency from issue to the driver to completion.", lDevice).WithUnit("seconds")
	descDiskWriteHist  = sdk.NewDesc("disk_write_latency_seconds", sdk.Histogram, "Write request latency from issue to the driver to completion.", lDevice).WithUnit("seconds")
)

// TCP retransmissions to the watched destinations.
var (
	descNFSRetransmits         = sdk.NewDesc("nfs_tcp_retransmits_total", sdk.Counter, "TCP segments retransmitted to an NFS server (on the NFS ports).", lServer)
	descObjectStoreRetransmits = sdk.NewDesc("object_store_tcp_retransmits_total", sdk.Counter, "TCP segments retransmitted to an object-store endpoint's addresses (on the object-store ports).", lEndpoint)
	descTCPDestinations        = sdk.NewDesc("ebpf_tcp_destinations", sdk.Gauge, "Destinations (address, port, class) in the retransmission map now.")
	descTCPEvicted             = sdk.NewDesc("ebpf_tcp_destinations_evicted_total", sdk.Counter, "Destinations evicted from the full retransmission map (inserted minus present); their counts since the last scrape are lost.")
	descObjectStoreConnections = sdk.NewDesc("object_store_connections_total", sdk.Counter, "TCP connections established to an object-store endpoint's addresses (on the object-store ports).", lEndpoint)
	descObjectStoreLatency     = sdk.NewDesc("object_store_connection_latency_seconds", sdk.Histogram, "TCP connection latency to an object-store endpoint: SYN sent to established, as this node sees it.", lEndpoint).WithUnit("seconds")
	descObjectStoreSent        = sdk.NewDesc("object_store_bytes_sent_total", sdk.Counter, "Bytes this node's TCP sockets sent to an object-store endpoint (socket writes, before retransmission).", lEndpoint).WithUnit("bytes")
	descObjectStoreReceived    = sdk.NewDesc("object_store_bytes_received_total", sdk.Counter, "Bytes this node's TCP sockets read from an object-store endpoint.", lEndpoint).WithUnit("bytes")
	descWatchedAddrs           = sdk.NewDesc("ebpf_watched_addresses", sdk.Gauge, "Addresses in the retransmission filter, by class (nfs, object_store).", "class")
)

// The plugin's own health.
var (
	descProgramLoaded    = sdk.NewDesc("ebpf_program_loaded", sdk.Gauge, "1 when the program for the kernel event runs in this attach mode, 0 when it was tried or is the fallback and does not.", lProgram, lAttach)
	descEventsDropped    = sdk.NewDesc("ebpf_events_dropped_total", sdk.Counter, "Events a program could not record, by reason.", lReason)
	descCollectionErrors = sdk.NewDesc("ebpf_collection_errors_total", sdk.Counter, "Partial failures, by collector.", lCollector)
)

// Collectors of ebpf_collection_errors_total.
const (
	collectorDisk        = "disk"
	collectorTCP         = "tcp_retransmits"
	collectorNFSServers  = "nfs_servers"
	collectorObjectStore = "object_store_endpoints"
	collectorConnections = "object_store_connections"
)

var errorCollectors = []string{collectorDisk, collectorTCP, collectorConnections, collectorNFSLatency, collectorRTT, collectorNFSServers, collectorObjectStore}

// Reasons of ebpf_events_dropped_total.
const (
	reasonDiskStatsFull   = "disk_stats_full"
	reasonDiskStartUpdate = "disk_start_update_failed"
	reasonTCPInsertFailed = "tcp_destination_insert_failed"
	reasonConnStatsFull   = "conn_stats_full"
)

var catalogue = []*sdk.Desc{
	descDiskReads, descDiskWrites, descDiskReadBytes, descDiskWriteBytes,
	descDiskReadHist, descDiskWriteHist,
	descNFSRetransmits, descObjectStoreRetransmits,
	descObjectStoreConnections, descObjectStoreLatency, descObjectStoreSent, descObjectStoreReceived,
	descTCPDestinations, descTCPEvicted, descWatchedAddrs,
	descNFSOpLatency, descNFSOpRequests, descNFSOpRetransmits,
	descNFSRTT, descObjectStoreRTT,
	descProgramLoaded, descEventsDropped, descCollectionErrors,
}

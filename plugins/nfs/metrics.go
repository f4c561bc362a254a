package main

import "github.com/plexporter/plexporter/sdk"

// Label names.
const (
	lVolume = "volume_id"
	lOp     = "nfs_operation"
	lXprt   = "xprt_idx"
	lServer = "server"
	lConn   = "conn"
	lEvent  = "event"
	lMount  = "mountpoint"
	lExport = "export"
	lVers   = "version"
	lProto  = "proto"
)

// Per-operation RPC statistics (per-op lines of mountstats).
var (
	descRPCCount       = sdk.NewDesc("nfs_rpc_count_total", sdk.Counter, "RPC operations issued (the per-op 'ops' field).", lVolume, lOp)
	descRPCTimeouts    = sdk.NewDesc("nfs_rpc_timeouts_total", sdk.Counter, "RPC major timeouts.", lVolume, lOp)
	descRPCRetransmits = sdk.NewDesc("nfs_rpc_retransmits_total", sdk.Counter, "RPC retransmissions (transmissions minus operations).", lVolume, lOp)
	descRPCErrors      = sdk.NewDesc("nfs_rpc_errors_total", sdk.Counter, "RPC operations that completed with an error status (no sample on kernels that do not print the field, before Linux 5.x).", lVolume, lOp)
	descRPCRTT         = sdk.NewDesc("nfs_rpc_rtt_seconds_total", sdk.Counter, "Cumulative time from transmission to reply, in seconds.", lVolume, lOp).WithUnit("seconds")
	descRPCExecute     = sdk.NewDesc("nfs_rpc_execute_seconds_total", sdk.Counter, "Cumulative time from queueing to completion, in seconds.", lVolume, lOp).WithUnit("seconds")
	descRPCQueue       = sdk.NewDesc("nfs_rpc_queue_seconds_total", sdk.Counter, "Cumulative time requests waited in the transmit queue, in seconds.", lVolume, lOp).WithUnit("seconds")
	descBytesSent      = sdk.NewDesc("nfs_bytes_sent_total", sdk.Counter, "Bytes sent for the operation, RPC headers included.", lVolume, lOp).WithUnit("bytes")
	descBytesReceived  = sdk.NewDesc("nfs_bytes_received_total", sdk.Counter, "Bytes received for the operation, RPC headers included.", lVolume, lOp).WithUnit("bytes")
	// Not named nfs_rpc_backlog: with metric_prefix crusoe_vm_ that would be
	// the Crusoe exporter's name for a counter (the raw bklog_u sum).
	descRPCBacklogAverage = sdk.NewDesc("nfs_rpc_backlog_average", sdk.Gauge, "Average backlog queue length per RPC send over the volume's transports since they were created (sum of bklog_u / sum of sends).", lVolume)
)

// Per-transport ("xprt:" line) statistics.
var (
	descXprtSends       = sdk.NewDesc("nfs_xprt_sends_total", sdk.Counter, "RPC requests sent on the transport.", lVolume, lXprt)
	descXprtRecvs       = sdk.NewDesc("nfs_xprt_recvs_total", sdk.Counter, "RPC replies received on the transport.", lVolume, lXprt)
	descXprtBinds       = sdk.NewDesc("nfs_xprt_bind_count_total", sdk.Counter, "Times the transport looked up the server's port with rpcbind (bind_count; 0 for NFSv4, which has a fixed port).", lVolume, lXprt)
	descXprtConnects    = sdk.NewDesc("nfs_xprt_connect_count_total", sdk.Counter, "Connections established by the transport (tcp only).", lVolume, lXprt)
	descXprtBadXids     = sdk.NewDesc("nfs_xprt_bad_xids_total", sdk.Counter, "Replies whose XID matched no outstanding request.", lVolume, lXprt)
	descXprtMaxSlots    = sdk.NewDesc("nfs_xprt_max_slots", sdk.Gauge, "Highest number of RPC slots in use at once.", lVolume, lXprt)
	descXprtIdle        = sdk.NewDesc("nfs_xprt_idle_seconds", sdk.Gauge, "Seconds since the transport was last used (tcp only).", lVolume, lXprt).WithUnit("seconds")
	descXprtRequestU    = sdk.NewDesc("nfs_xprt_request_utilization_total", sdk.Counter, "Sum over sends of the requests outstanding at send time (req_u); divide its rate by the sends rate for the average.", lVolume, lXprt)
	descXprtBacklogU    = sdk.NewDesc("nfs_xprt_backlog_utilization_total", sdk.Counter, "Sum over sends of the backlog queue length at send time (bklog_u).", lVolume, lXprt)
	descXprtSendingU    = sdk.NewDesc("nfs_xprt_sending_utilization_total", sdk.Counter, "Sum over sends of the sending queue length at send time (sending_u).", lVolume, lXprt)
	descXprtPendingU    = sdk.NewDesc("nfs_xprt_pending_utilization_total", sdk.Counter, "Sum over sends of the pending queue length at send time (pending_u).", lVolume, lXprt)
	descXprtTCPState    = sdk.NewDesc("nfs_xprt_tcp_state", sdk.Gauge, "Kernel TCP state code of the lane's socket (1 ESTABLISHED, 2 SYN_SENT, 8 CLOSE_WAIT, ...); 0 when no socket is unambiguously attributable to the lane.", lVolume, lXprt)
	descXprtTxQueue     = sdk.NewDesc("nfs_xprt_tx_queue_bytes", sdk.Gauge, "Send queue of the lane's socket in bytes (only when a socket is attributed).", lVolume, lXprt).WithUnit("bytes")
	descXprtRxQueue     = sdk.NewDesc("nfs_xprt_rx_queue_bytes", sdk.Gauge, "Receive queue of the lane's socket in bytes (only when a socket is attributed).", lVolume, lXprt).WithUnit("bytes")
	descXprtRetransmits = sdk.NewDesc("nfs_xprt_retransmit_timeouts", sdk.Gauge, "Unrecovered retransmission timeouts of the lane's socket (retrnsmt column; only when a socket is attributed).", lVolume, lXprt)
)

// Per-server socket state (all kernel connections to an NFS server's port).
var (
	descServerTCPState    = sdk.NewDesc("nfs_server_tcp_state", sdk.Gauge, "Kernel TCP state code of a client connection to an NFS server.", lServer, lConn)
	descServerTxQueue     = sdk.NewDesc("nfs_server_tx_queue_bytes", sdk.Gauge, "Send queue of a client connection to an NFS server, in bytes.", lServer, lConn).WithUnit("bytes")
	descServerRxQueue     = sdk.NewDesc("nfs_server_rx_queue_bytes", sdk.Gauge, "Receive queue of a client connection to an NFS server, in bytes.", lServer, lConn).WithUnit("bytes")
	descServerRetransmits = sdk.NewDesc("nfs_server_retransmit_timeouts", sdk.Gauge, "Unrecovered retransmission timeouts of a client connection to an NFS server.", lServer, lConn)
	descServerConnections = sdk.NewDesc("nfs_server_connections", sdk.Gauge, "Kernel-owned TCP connections from this host to the NFS server's port.", lServer)
)

// Per-volume mount events and byte counters.
var (
	descMountInfo           = sdk.NewDesc("nfs_mount_info", sdk.Gauge, "1 for every mount point of the volume, with the export, server, NFS version and transport protocol of its mount options.", lVolume, lMount, lServer, lExport, lVers, lProto)
	descMountEvents         = sdk.NewDesc("nfs_mount_events_total", sdk.Counter, "Every counter of the mountstats events: line, by the kernel's name for it (include/linux/nfs_iostat.h; the plugin README lists them).", lVolume, lEvent)
	descMountAge            = sdk.NewDesc("nfs_mount_age_seconds", sdk.Gauge, "Seconds since the NFS superblock was created.", lVolume).WithUnit("seconds")
	descMountCongestionWait = sdk.NewDesc("nfs_mount_congestion_wait_events_total", sdk.Counter, "Congestion-wait events.", lVolume)
	descMountSillyRename    = sdk.NewDesc("nfs_mount_silly_rename_events_total", sdk.Counter, "Files removed while still open (silly renames).", lVolume)
	descMountShortRead      = sdk.NewDesc("nfs_mount_short_read_events_total", sdk.Counter, "Reads for which the server returned less data than asked.", lVolume)
	descMountShortWrite     = sdk.NewDesc("nfs_mount_short_write_events_total", sdk.Counter, "Writes for which the server stored less data than sent.", lVolume)
	descMountDelay          = sdk.NewDesc("nfs_mount_delay_events_total", sdk.Counter, "Times the server answered NFS3ERR_JUKEBOX/NFS4ERR_DELAY.", lVolume)
	descMountNormalRead     = sdk.NewDesc("nfs_mount_normal_read_bytes_total", sdk.Counter, "Bytes applications read through the page cache.", lVolume).WithUnit("bytes")
	descMountNormalWrite    = sdk.NewDesc("nfs_mount_normal_write_bytes_total", sdk.Counter, "Bytes applications wrote through the page cache.", lVolume).WithUnit("bytes")
	descMountDirectRead     = sdk.NewDesc("nfs_mount_direct_read_bytes_total", sdk.Counter, "Bytes applications read with O_DIRECT.", lVolume).WithUnit("bytes")
	descMountDirectWrite    = sdk.NewDesc("nfs_mount_direct_write_bytes_total", sdk.Counter, "Bytes applications wrote with O_DIRECT.", lVolume).WithUnit("bytes")
	descMountServerRead     = sdk.NewDesc("nfs_mount_server_read_bytes_total", sdk.Counter, "Bytes read from the server (READ payloads).", lVolume).WithUnit("bytes")
	descMountServerWrite    = sdk.NewDesc("nfs_mount_server_write_bytes_total", sdk.Counter, "Bytes written to the server (WRITE payloads).", lVolume).WithUnit("bytes")
	descMountReadPages      = sdk.NewDesc("nfs_mount_read_pages_total", sdk.Counter, "Pages read via readpage(s).", lVolume)
	descMountWritePages     = sdk.NewDesc("nfs_mount_write_pages_total", sdk.Counter, "Pages written via writepage(s).", lVolume)
)

// socketDescs are the families that need the TCP socket tables; when the
// allowlist disables all of them the tables are not read.
var socketDescs = []*sdk.Desc{
	descXprtTCPState, descXprtTxQueue, descXprtRxQueue, descXprtRetransmits,
	descServerTCPState, descServerTxQueue, descServerRxQueue, descServerRetransmits, descServerConnections,
}

// Plugin health: the project's error-counter convention,
// nfs_collection_errors_total{collector}.
var descCollectionErrors = sdk.NewDesc("nfs_collection_errors_total", sdk.Counter, "Failures while reading or parsing a source, by collector (mountstats, mount, mountinfo, tcp).", "collector")

// Collector names: the collector label of nfs_collection_errors_total and
// of the partial errors sent to the host.
const (
	collectorMountstats = "mountstats" // the mountstats file could not be read
	collectorMount      = "mount"      // a line or block of one mount could not be parsed, or held an implausible value
	collectorMountinfo  = "mountinfo"  // mountinfo could not be read or matched: superblocks identified by their statistics
	collectorTCP        = "tcp"        // a socket table could not be read, or rows of it parsed
)

// errorCollectors are the collector label values, exported from the first
// scrape on so that rate() works from zero.
var errorCollectors = []string{collectorMountstats, collectorMount, collectorMountinfo, collectorTCP}

var catalogue = []*sdk.Desc{
	descRPCCount, descRPCTimeouts, descRPCRetransmits, descRPCErrors, descRPCRTT, descRPCExecute, descRPCQueue, descBytesSent, descBytesReceived, descRPCBacklogAverage,
	descXprtSends, descXprtRecvs, descXprtBinds, descXprtConnects, descXprtBadXids, descXprtMaxSlots, descXprtIdle, descXprtRequestU, descXprtBacklogU, descXprtSendingU, descXprtPendingU,
	descXprtTCPState, descXprtTxQueue, descXprtRxQueue, descXprtRetransmits,
	descServerTCPState, descServerTxQueue, descServerRxQueue, descServerRetransmits, descServerConnections,
	descMountInfo, descMountEvents, descMountAge, descMountCongestionWait, descMountSillyRename, descMountShortRead, descMountShortWrite, descMountDelay,
	descMountNormalRead, descMountNormalWrite, descMountDirectRead, descMountDirectWrite, descMountServerRead, descMountServerWrite, descMountReadPages, descMountWritePages,
	descCollectionErrors,
}

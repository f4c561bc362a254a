package main

import "github.com/plexporter/plexporter/sdk"

// Label names.
const (
	lVolume = "volume_id"
	lOp     = "nfs_operation"
	lXprt   = "xprt_idx"
	lServer = "server"
	lConn   = "conn"
)

// Per-operation RPC statistics (per-op lines of mountstats).
var (
	rpcCount       = sdk.NewDesc("nfs_rpc_count_total", sdk.Counter, "RPC operations issued (the per-op 'ops' field).", lVolume, lOp)
	rpcTimeouts    = sdk.NewDesc("nfs_rpc_timeouts_total", sdk.Counter, "RPC major timeouts.", lVolume, lOp)
	rpcRetransmits = sdk.NewDesc("nfs_rpc_retransmits_total", sdk.Counter, "RPC retransmissions (transmissions minus operations).", lVolume, lOp)
	rpcErrors      = sdk.NewDesc("nfs_rpc_errors_total", sdk.Counter, "RPC operations that completed with an error status (0 on kernels that do not print the field).", lVolume, lOp)
	rpcRTT         = sdk.NewDesc("nfs_rpc_rtt_seconds_total", sdk.Counter, "Cumulative time from transmission to reply, in seconds.", lVolume, lOp).WithUnit("seconds")
	rpcExecute     = sdk.NewDesc("nfs_rpc_execute_seconds_total", sdk.Counter, "Cumulative time from queueing to completion, in seconds.", lVolume, lOp).WithUnit("seconds")
	rpcQueue       = sdk.NewDesc("nfs_rpc_queue_seconds_total", sdk.Counter, "Cumulative time requests waited in the transmit queue, in seconds.", lVolume, lOp).WithUnit("seconds")
	bytesSent      = sdk.NewDesc("nfs_bytes_sent_total", sdk.Counter, "Bytes sent for the operation, RPC headers included.", lVolume, lOp).WithUnit("bytes")
	bytesReceived  = sdk.NewDesc("nfs_bytes_received_total", sdk.Counter, "Bytes received for the operation, RPC headers included.", lVolume, lOp).WithUnit("bytes")
	rpcBacklog     = sdk.NewDesc("nfs_rpc_backlog", sdk.Gauge, "Average backlog queue length per RPC send over the volume's transports since they were created (sum of bklog_u / sum of sends).", lVolume)
)

// Per-transport ("xprt:" line) statistics.
var (
	xprtSends       = sdk.NewDesc("nfs_xprt_sends_total", sdk.Counter, "RPC requests sent on the transport.", lVolume, lXprt)
	xprtRecvs       = sdk.NewDesc("nfs_xprt_recvs_total", sdk.Counter, "RPC replies received on the transport.", lVolume, lXprt)
	xprtConnects    = sdk.NewDesc("nfs_xprt_connect_count_total", sdk.Counter, "Connections established by the transport (tcp only).", lVolume, lXprt)
	xprtBadXids     = sdk.NewDesc("nfs_xprt_bad_xids_total", sdk.Counter, "Replies whose XID matched no outstanding request.", lVolume, lXprt)
	xprtMaxSlots    = sdk.NewDesc("nfs_xprt_max_slots", sdk.Gauge, "Highest number of RPC slots in use at once.", lVolume, lXprt)
	xprtIdle        = sdk.NewDesc("nfs_xprt_idle_seconds", sdk.Gauge, "Seconds since the transport was last used (tcp only).", lVolume, lXprt).WithUnit("seconds")
	xprtRequestU    = sdk.NewDesc("nfs_xprt_request_utilization_total", sdk.Counter, "Sum over sends of the requests outstanding at send time (req_u); divide its rate by the sends rate for the average.", lVolume, lXprt)
	xprtBacklogU    = sdk.NewDesc("nfs_xprt_backlog_utilization_total", sdk.Counter, "Sum over sends of the backlog queue length at send time (bklog_u).", lVolume, lXprt)
	xprtSendingU    = sdk.NewDesc("nfs_xprt_sending_utilization_total", sdk.Counter, "Sum over sends of the sending queue length at send time (sending_u).", lVolume, lXprt)
	xprtPendingU    = sdk.NewDesc("nfs_xprt_pending_utilization_total", sdk.Counter, "Sum over sends of the pending queue length at send time (pending_u).", lVolume, lXprt)
	xprtTCPState    = sdk.NewDesc("nfs_xprt_tcp_state", sdk.Gauge, "Kernel TCP state code of the lane's socket (1 ESTABLISHED, 2 SYN_SENT, 8 CLOSE_WAIT, ...); 0 when no socket is unambiguously attributable to the lane.", lVolume, lXprt)
	xprtTxQueue     = sdk.NewDesc("nfs_xprt_tx_queue_bytes", sdk.Gauge, "Send queue of the lane's socket in bytes (only when a socket is attributed).", lVolume, lXprt).WithUnit("bytes")
	xprtRxQueue     = sdk.NewDesc("nfs_xprt_rx_queue_bytes", sdk.Gauge, "Receive queue of the lane's socket in bytes (only when a socket is attributed).", lVolume, lXprt).WithUnit("bytes")
	xprtRetransmits = sdk.NewDesc("nfs_xprt_retransmit_timeouts", sdk.Gauge, "Unrecovered retransmission timeouts of the lane's socket (retrnsmt column; only when a socket is attributed).", lVolume, lXprt)
)

// Per-server socket state (all kernel connections to an NFS server's port).
var (
	serverTCPState    = sdk.NewDesc("nfs_server_tcp_state", sdk.Gauge, "Kernel TCP state code of a client connection to an NFS server.", lServer, lConn)
	serverTxQueue     = sdk.NewDesc("nfs_server_tx_queue_bytes", sdk.Gauge, "Send queue of a client connection to an NFS server, in bytes.", lServer, lConn).WithUnit("bytes")
	serverRxQueue     = sdk.NewDesc("nfs_server_rx_queue_bytes", sdk.Gauge, "Receive queue of a client connection to an NFS server, in bytes.", lServer, lConn).WithUnit("bytes")
	serverRetransmits = sdk.NewDesc("nfs_server_retransmit_timeouts", sdk.Gauge, "Unrecovered retransmission timeouts of a client connection to an NFS server.", lServer, lConn)
	serverConnections = sdk.NewDesc("nfs_server_connections", sdk.Gauge, "Kernel-owned TCP connections from this host to the NFS server's port.", lServer)
)

// Per-volume mount events and byte counters.
var (
	mountAge            = sdk.NewDesc("nfs_mount_age_seconds", sdk.Gauge, "Seconds since the NFS superblock was created.", lVolume).WithUnit("seconds")
	mountCongestionWait = sdk.NewDesc("nfs_mount_congestion_wait_events_total", sdk.Counter, "Congestion-wait events.", lVolume)
	mountSillyRename    = sdk.NewDesc("nfs_mount_silly_rename_events_total", sdk.Counter, "Files removed while still open (silly renames).", lVolume)
	mountShortRead      = sdk.NewDesc("nfs_mount_short_read_events_total", sdk.Counter, "Reads for which the server returned less data than asked.", lVolume)
	mountShortWrite     = sdk.NewDesc("nfs_mount_short_write_events_total", sdk.Counter, "Writes for which the server stored less data than sent.", lVolume)
	mountDelay          = sdk.NewDesc("nfs_mount_delay_events_total", sdk.Counter, "Times the server answered NFS3ERR_JUKEBOX/NFS4ERR_DELAY.", lVolume)
	mountNormalRead     = sdk.NewDesc("nfs_mount_normal_read_bytes_total", sdk.Counter, "Bytes applications read through the page cache.", lVolume).WithUnit("bytes")
	mountNormalWrite    = sdk.NewDesc("nfs_mount_normal_write_bytes_total", sdk.Counter, "Bytes applications wrote through the page cache.", lVolume).WithUnit("bytes")
	mountDirectRead     = sdk.NewDesc("nfs_mount_direct_read_bytes_total", sdk.Counter, "Bytes applications read with O_DIRECT.", lVolume).WithUnit("bytes")
	mountDirectWrite    = sdk.NewDesc("nfs_mount_direct_write_bytes_total", sdk.Counter, "Bytes applications wrote with O_DIRECT.", lVolume).WithUnit("bytes")
	mountServerRead     = sdk.NewDesc("nfs_mount_server_read_bytes_total", sdk.Counter, "Bytes read from the server (READ payloads).", lVolume).WithUnit("bytes")
	mountServerWrite    = sdk.NewDesc("nfs_mount_server_write_bytes_total", sdk.Counter, "Bytes written to the server (WRITE payloads).", lVolume).WithUnit("bytes")
	mountReadPages      = sdk.NewDesc("nfs_mount_read_pages_total", sdk.Counter, "Pages read via readpage(s).", lVolume)
	mountWritePages     = sdk.NewDesc("nfs_mount_write_pages_total", sdk.Counter, "Pages written via writepage(s).", lVolume)
)

// Plugin health.
var collectionErrors = sdk.NewDesc("nfs_collection_errors_total", sdk.Counter, "Failures while reading or parsing a source, by collector (mountstats, mount, tcp).", "collector")

// errorCollectors are the collector label values, exported from the first
// scrape on so that rate() works from zero.
var errorCollectors = []string{"mountstats", "mount", "tcp"}

var catalogue = []*sdk.Desc{
	rpcCount, rpcTimeouts, rpcRetransmits, rpcErrors, rpcRTT, rpcExecute, rpcQueue, bytesSent, bytesReceived, rpcBacklog,
	xprtSends, xprtRecvs, xprtConnects, xprtBadXids, xprtMaxSlots, xprtIdle, xprtRequestU, xprtBacklogU, xprtSendingU, xprtPendingU,
	xprtTCPState, xprtTxQueue, xprtRxQueue, xprtRetransmits,
	serverTCPState, serverTxQueue, serverRxQueue, serverRetransmits, serverConnections,
	mountAge, mountCongestionWait, mountSillyRename, mountShortRead, mountShortWrite, mountDelay,
	mountNormalRead, mountNormalWrite, mountDirectRead, mountDirectWrite, mountServerRead, mountServerWrite, mountReadPages, mountWritePages,
	collectionErrors,
}

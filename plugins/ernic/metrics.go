package main

import "github.com/plexporter/plexporter/sdk"

// Label names: ernic-exporter's, kept for drop-in compatibility.
const (
	lID      = "ernic_id"
	lRole    = "role"
	lMAC     = "mac"
	lVMName  = "vm_name"
	lState   = "state"
	lQP      = "qp"
	lCounter = "counter"
)

// Cluster and per-instance families from instances.json and the liveness
// check (ernic-exporter's names and types).
var (
	descInstances        = sdk.NewDesc("ernic_instances", sdk.Gauge, "ERNIC server instances listed in instances.json.")
	descVMs              = sdk.NewDesc("ernic_vms", sdk.Gauge, "Instances with a VM attached (a vm entry whose attached is true).")
	descInstanceUp       = sdk.NewDesc("ernic_instance_up", sdk.Gauge, "1 if the instance's server process exists in the node's procfs (a zombie is down), else 0.", lID, lRole, lMAC)
	descInstanceUptime   = sdk.NewDesc("ernic_instance_uptime_seconds", sdk.Gauge, "Seconds since the instance's server process started (only while it is up and its stat file is readable).", lID, lRole).WithUnit("seconds")
	descVMAttached       = sdk.NewDesc("ernic_vm_attached", sdk.Gauge, "1 if a VM is attached to the instance; vm_name is empty unless attached.", lID, lRole, lVMName)
	descVMUptime         = sdk.NewDesc("ernic_vm_uptime_seconds", sdk.Gauge, "Seconds since the attached VM was launched (launched_at, else the start of vm_pid); attached instances only.", lID, lRole).WithUnit("seconds")
	descVMGPUPassthrough = sdk.NewDesc("ernic_vm_gpu_passthrough", sdk.Gauge, "1 if the attached VM was launched with GPU passthrough (a non-empty gpu), else 0; attached instances only.", lID, lRole)
)

// Per-instance families from <id>.stats. Cumulative values are counters,
// as in the newest ernic-exporter.
var (
	descIPBytesTx         = sdk.NewDesc("ernic_ip_bytes_tx_total", sdk.Counter, "IP bytes transmitted by the instance (total_ip_bytes_tx).", lID, lRole).WithUnit("bytes")
	descIPBytesRx         = sdk.NewDesc("ernic_ip_bytes_rx_total", sdk.Counter, "IP bytes received by the instance (total_ip_bytes_rx).", lID, lRole).WithUnit("bytes")
	descIPBytes           = sdk.NewDesc("ernic_ip_bytes_total", sdk.Counter, "IP bytes transmitted plus received (total_ip_bytes_tx + total_ip_bytes_rx).", lID, lRole).WithUnit("bytes")
	descRDMABytesSent     = sdk.NewDesc("ernic_rdma_bytes_sent_total", sdk.Counter, "RDMA bytes sent (total_bytes_sent).", lID, lRole).WithUnit("bytes")
	descRDMABytesReceived = sdk.NewDesc("ernic_rdma_bytes_received_total", sdk.Counter, "RDMA bytes received (total_bytes_received).", lID, lRole).WithUnit("bytes")
	descRDMABytesRead     = sdk.NewDesc("ernic_rdma_bytes_read_total", sdk.Counter, "Bytes moved by RDMA READ (total_bytes_rdma_read).", lID, lRole).WithUnit("bytes")
	descRDMABytesWrite    = sdk.NewDesc("ernic_rdma_bytes_write_total", sdk.Counter, "Bytes moved by RDMA WRITE (total_bytes_rdma_write).", lID, lRole).WithUnit("bytes")
	descRDMABytes         = sdk.NewDesc("ernic_rdma_bytes_total", sdk.Counter, "Sum of the four RDMA byte counters (sent, received, read, write), summed exactly.", lID, lRole).WithUnit("bytes")
	descFLRResets         = sdk.NewDesc("ernic_flr_reset_total", sdk.Counter, "Device resets (reset_count).", lID, lRole)
	descCommands          = sdk.NewDesc("ernic_commands_total", sdk.Counter, "Device commands processed (commands).", lID, lRole)
	descInterrupts        = sdk.NewDesc("ernic_interrupts_total", sdk.Counter, "Interrupts raised to the guest (interrupts).", lID, lRole)
	descMMIOReads         = sdk.NewDesc("ernic_mmio_reads_total", sdk.Counter, "MMIO reads, BAR0 plus UAR (mmio_reads_total).", lID, lRole)
	descMMIOWrites        = sdk.NewDesc("ernic_mmio_writes_total", sdk.Counter, "MMIO writes, BAR0 plus UAR (mmio_writes_total).", lID, lRole)
	descStatsWrites       = sdk.NewDesc("ernic_stats_writes_total", sdk.Counter, "Times the server has rewritten its statistics file (Write count).", lID, lRole)
	descConnectionUp      = sdk.NewDesc("ernic_connection_up", sdk.Gauge, "1 if the server's connection state starts with \"connected\"; state is the server's string, \"unknown\" when the file has none.", lID, lRole, lState)
	descQPCount           = sdk.NewDesc("ernic_qp_count", sdk.Gauge, "Queue pairs in the statistics file (distinct handles).", lID, lRole)
	descLIFCounter        = sdk.NewDesc("ernic_lif_counter_total", sdk.Counter, "LIF statistics block of the statistics file, one series per counter the server prints (struct ionic_lif_stats names).", lID, lRole, lCounter)
)

// Per-QP counters from the "QP <handle>:" sections.
var (
	descQPBytesSent      = sdk.NewDesc("ernic_qp_bytes_sent_total", sdk.Counter, "Bytes sent on the queue pair.", lID, lRole, lQP).WithUnit("bytes")
	descQPBytesReceived  = sdk.NewDesc("ernic_qp_bytes_received_total", sdk.Counter, "Bytes received on the queue pair.", lID, lRole, lQP).WithUnit("bytes")
	descQPBytesRDMARead  = sdk.NewDesc("ernic_qp_bytes_rdma_read_total", sdk.Counter, "Bytes moved by RDMA READ on the queue pair.", lID, lRole, lQP).WithUnit("bytes")
	descQPBytesRDMAWrite = sdk.NewDesc("ernic_qp_bytes_rdma_write_total", sdk.Counter, "Bytes moved by RDMA WRITE on the queue pair.", lID, lRole, lQP).WithUnit("bytes")
	descQPWQEs           = sdk.NewDesc("ernic_qp_wqes_processed_total", sdk.Counter, "Work queue entries processed on the queue pair.", lID, lRole, lQP)
	descQPCQEs           = sdk.NewDesc("ernic_qp_cqes_posted_total", sdk.Counter, "Completion queue entries posted for the queue pair.", lID, lRole, lQP)
	descQPDoorbellSend   = sdk.NewDesc("ernic_qp_doorbell_send_total", sdk.Counter, "Send queue doorbells rung on the queue pair.", lID, lRole, lQP)
	descQPDoorbellRecv   = sdk.NewDesc("ernic_qp_doorbell_recv_total", sdk.Counter, "Receive queue doorbells rung on the queue pair.", lID, lRole, lQP)
)

// The plugin's own health (plexporter families, not ernic-exporter's).
var (
	descCollectionErrors = sdk.NewDesc("ernic_collection_errors_total", sdk.Counter, "Failures while reading or parsing a source, by collector (manifest, stats, procfs).", "collector")
	descTornReads        = sdk.NewDesc("ernic_stats_torn_reads_total", sdk.Counter, "Reads of the instance's statistics file that were refused (incomplete, changing while read) or had a counter held at its last value (missing, or lower within one server process).", lID, lRole)
	descOrphanStats      = sdk.NewDesc("ernic_orphan_stats_files", sdk.Gauge, "<id>.stats files in the run directory whose id is not in instances.json (ignored, like ernic-exporter does).")
)

// Collector names: the collector label of ernic_collection_errors_total and
// of the partial errors sent to the host.
const (
	collectorManifest = "manifest" // instances.json unreadable or not valid JSON
	collectorStats    = "stats"    // the run directory or a .stats file could not be read
	collectorProcfs   = "procfs"   // a server's liveness could not be decided
)

// errorCollectors are exported from the first scrape on so rate() works from zero.
var errorCollectors = []string{collectorManifest, collectorStats, collectorProcfs}

// instanceCounters maps the device keys of a .stats file to their families.
var instanceCounters = []struct {
	key  string
	desc *sdk.Desc
}{
	{"total_ip_bytes_tx", descIPBytesTx},
	{"total_ip_bytes_rx", descIPBytesRx},
	{"total_bytes_sent", descRDMABytesSent},
	{"total_bytes_received", descRDMABytesReceived},
	{"total_bytes_rdma_read", descRDMABytesRead},
	{"total_bytes_rdma_write", descRDMABytesWrite},
	{"reset_count", descFLRResets},
	{"commands", descCommands},
	{"interrupts", descInterrupts},
	{"mmio_reads_total", descMMIOReads},
	{"mmio_writes_total", descMMIOWrites},
	{keyWriteCount, descStatsWrites},
}

// Sums exported as their own counters, summed exactly before conversion.
var (
	rdmaByteKeys = []string{"total_bytes_sent", "total_bytes_received", "total_bytes_rdma_read", "total_bytes_rdma_write"}
	ipByteKeys   = []string{"total_ip_bytes_tx", "total_ip_bytes_rx"}
)

// qpCounters maps the keys of a QP section to their families.
var qpCounters = []struct {
	key  string
	desc *sdk.Desc
}{
	{"bytes_sent", descQPBytesSent},
	{"bytes_received", descQPBytesReceived},
	{"bytes_rdma_read", descQPBytesRDMARead},
	{"bytes_rdma_write", descQPBytesRDMAWrite},
	{"wqes_processed", descQPWQEs},
	{"cqes_posted", descQPCQEs},
	{"doorbell_send", descQPDoorbellSend},
	{"doorbell_recv", descQPDoorbellRecv},
}

var catalogue = []*sdk.Desc{
	descInstances, descVMs, descInstanceUp, descInstanceUptime, descVMAttached, descVMUptime, descVMGPUPassthrough,
	descIPBytesTx, descIPBytesRx, descIPBytes, descRDMABytesSent, descRDMABytesReceived, descRDMABytesRead, descRDMABytesWrite, descRDMABytes,
	descFLRResets, descCommands, descInterrupts, descMMIOReads, descMMIOWrites, descStatsWrites, descConnectionUp, descQPCount, descLIFCounter,
	descQPBytesSent, descQPBytesReceived, descQPBytesRDMARead, descQPBytesRDMAWrite, descQPWQEs, descQPCQEs, descQPDoorbellSend, descQPDoorbellRecv,
	descCollectionErrors, descTornReads, descOrphanStats,
}

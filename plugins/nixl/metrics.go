package main

import "github.com/plexporter/plexporter/sdk"

// Label names. hostname and agent_name are NIXL's exporters' labels, so
// dashboards built for them work unchanged.
const (
	lHost   = "hostname"
	lAgent  = "agent_name"
	lStatus = "status"
	lReason = "reason"
)

// NIXL's families (names, types and meaning of its prometheus exporter's
// descriptor table), summed from the drained events of each agent. Each is
// selected by the name of the event it is derived from too, as NIXL's
// allowlist (NIXL_TELEMETRY_ENABLED_METRICS) selects them: agent_tx_bytes
// selects agent_tx_bytes_total and agent_tx_last_bytes, agent_xfer_time the
// counter, the gauge and the histogram, agent_err_* agent_errors_total.
var (
	descTxBytes         = sdk.NewDesc("agent_tx_bytes_total", sdk.Counter, "Bytes of completed transfers this agent initiated as WRITE.", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_tx_bytes")
	descRxBytes         = sdk.NewDesc("agent_rx_bytes_total", sdk.Counter, "Bytes of completed transfers this agent initiated as READ.", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_rx_bytes")
	descTxRequests      = sdk.NewDesc("agent_tx_requests_num_total", sdk.Counter, "Completed WRITE transfer requests this agent initiated.", lHost, lAgent).WithSelectedBy("agent_tx_requests_num")
	descRxRequests      = sdk.NewDesc("agent_rx_requests_num_total", sdk.Counter, "Completed READ transfer requests this agent initiated.", lHost, lAgent).WithSelectedBy("agent_rx_requests_num")
	descMemRegistered   = sdk.NewDesc("agent_memory_registered_total", sdk.Counter, "Bytes of memory registered (sum of the descriptor lengths of successful registerMem calls).", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_memory_registered")
	descMemDeregistered = sdk.NewDesc("agent_memory_deregistered_total", sdk.Counter, "Bytes of memory deregistered.", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_memory_deregistered")
	descXferTimeTotal   = sdk.NewDesc("agent_xfer_time_total", sdk.Counter, "Sum of transfer times from start to completion, in microseconds (NIXL's name, without a unit suffix).", lHost, lAgent).WithSelectedBy("agent_xfer_time")
	descPostTimeTotal   = sdk.NewDesc("agent_xfer_post_time_total", sdk.Counter, "Sum of transfer times from start to posting to the backend, in microseconds (NIXL's name, without a unit suffix).", lHost, lAgent).WithSelectedBy("agent_xfer_post_time")
	descEventsDropped   = sdk.NewDesc("agent_telemetry_events_dropped_total", sdk.Counter, "Telemetry events the agent dropped in its staging queue, before the ring (NIXL v1.4+; ring-full drops are not counted by NIXL, see nixl_buffer_full_total).", lHost, lAgent).WithSelectedBy("agent_telemetry_events_dropped")
	descErrors          = sdk.NewDesc("agent_errors_total", sdk.Counter, "Failed NIXL API calls by status (NIXL_ERR_*), every status exported.", lHost, lAgent, lStatus).WithSelectedBy(errorEvents()...)

	descTxLast       = sdk.NewDesc("agent_tx_last_bytes", sdk.Gauge, "Bytes of the last completed WRITE transfer (0 before the first).", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_tx_bytes")
	descRxLast       = sdk.NewDesc("agent_rx_last_bytes", sdk.Gauge, "Bytes of the last completed READ transfer (0 before the first).", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_rx_bytes")
	descMemRegLast   = sdk.NewDesc("agent_memory_registered_last_bytes", sdk.Gauge, "Bytes of the last memory registration (0 before the first).", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_memory_registered")
	descMemDeregLast = sdk.NewDesc("agent_memory_deregistered_last_bytes", sdk.Gauge, "Bytes of the last memory deregistration (0 before the first).", lHost, lAgent).WithUnit("bytes").WithSelectedBy("agent_memory_deregistered")
	descXferTimeLast = sdk.NewDesc("agent_xfer_time", sdk.Gauge, "Time of the last transfer from start to completion, in microseconds (0 before the first).", lHost, lAgent).WithSelectedBy("agent_xfer_time")
	descPostTimeLast = sdk.NewDesc("agent_xfer_post_time", sdk.Gauge, "Time of the last transfer from start to posting, in microseconds (0 before the first).", lHost, lAgent).WithSelectedBy("agent_xfer_post_time")
	descXferTimeHist = sdk.NewDesc("agent_xfer_time_us", sdk.Histogram, "Transfer times from start to completion, in microseconds.", lHost, lAgent).WithSelectedBy("agent_xfer_time")
	descPostTimeHist = sdk.NewDesc("agent_xfer_post_time_us", sdk.Histogram, "Transfer times from start to posting to the backend, in microseconds.", lHost, lAgent).WithSelectedBy("agent_xfer_post_time")
	// agentCounters and agentGauges are the families that are one
	// event type's sum and last value.
	agentCounters = []typedDesc{{evTxBytes, descTxBytes}, {evRxBytes, descRxBytes}, {evTxRequests, descTxRequests}, {evRxRequests, descRxRequests},
		{evMemRegistered, descMemRegistered}, {evMemDeregistered, descMemDeregistered}, {evXferTime, descXferTimeTotal}, {evXferPostTime, descPostTimeTotal}, {evEventsDropped, descEventsDropped}}
	agentGauges = []typedDesc{{evTxBytes, descTxLast}, {evRxBytes, descRxLast}, {evMemRegistered, descMemRegLast}, {evMemDeregistered, descMemDeregLast},
		{evXferTime, descXferTimeLast}, {evXferPostTime, descPostTimeLast}}
)

// errorEvents are the names of NIXL's error events, agent_err_<status>,
// which select agent_errors_total (and, one by one, its status series).
func errorEvents() []string {
	out := make([]string, len(errorStatuses))
	for i, s := range errorStatuses {
		out[i] = errorEventPrefix + s
	}
	return out
}

const errorEventPrefix = "agent_err_"

// typedDesc is a family fed by one event type.
type typedDesc struct {
	event eventType
	desc  *sdk.Desc
}

// The plugin's own families: the state of each ring and of its reader.
var (
	descBufferFull     = sdk.NewDesc("nixl_buffer_full_total", sdk.Counter, "Drains that found the agent's ring full: the agent was dropping new events (NIXL counts these losses nowhere).", lAgent)
	descBufferUnread   = sdk.NewDesc("nixl_buffer_unread_events", sdk.Gauge, "Most events one drain found waiting in the ring since the previous scrape (capacity-1 means full: the agent was dropping events).", lAgent)
	descBufferCapacity = sdk.NewDesc("nixl_buffer_capacity_events", sdk.Gauge, "Slots of the agent's ring; capacity-1 events fit.", lAgent)
	descReaderErrors   = sdk.NewDesc("nixl_reader_errors_total", sdk.Counter, "Problems reading a file of a telemetry directory, by reason (open, invalid_header, invalid_position, truncated, unknown_event, read_pos_moved, duplicate_name).", lAgent, lReason)
	descAgents         = sdk.NewDesc("nixl_agents", sdk.Gauge, "Agents whose rings the plugin drains.")
	descExpired        = sdk.NewDesc("nixl_agents_expired_total", sdk.Counter, "Agents whose series were dropped because their ring stayed idle for stale_after and no process maps it.")
	descCollectErrors  = sdk.NewDesc("nixl_collection_errors_total", sdk.Counter, "Failures by collector: discovery (a telemetry directory could not be listed) and reader (a ring could not be read; the reason is in nixl_reader_errors_total).", "collector")
)

// Reasons, the reason label of nixl_reader_errors_total, every one
// exported from a file's first scrape on.
const (
	reasonOpen            = "open"             // open, stat or mmap failed (permission: see README)
	reasonInvalidHeader   = "invalid_header"   // not a NIXL ring: size, version, capacity or mask
	reasonInvalidPosition = "invalid_position" // write_pos or read_pos beyond capacity
	reasonTruncated       = "truncated"        // the file shrank under the reader
	reasonUnknownEvent    = "unknown_event"    // an event type this layout does not define (one per event)
	reasonReadPosMoved    = "read_pos_moved"   // read_pos not where the plugin left it: another consumer, or the agent restarted
	reasonDuplicateName   = "duplicate_name"   // the same agent name in two telemetry directories
)

var reasons = []string{reasonOpen, reasonInvalidHeader, reasonInvalidPosition, reasonTruncated, reasonUnknownEvent, reasonReadPosMoved, reasonDuplicateName}

// Collector names of nixl_collection_errors_total and of partial errors.
const (
	collectorDiscovery = "discovery"
	collectorReader    = "reader"
)

var errorCollectors = []string{collectorDiscovery, collectorReader}

var catalogue = []*sdk.Desc{
	descTxBytes, descRxBytes, descTxRequests, descRxRequests, descMemRegistered, descMemDeregistered,
	descXferTimeTotal, descPostTimeTotal, descEventsDropped, descErrors,
	descTxLast, descRxLast, descMemRegLast, descMemDeregLast, descXferTimeLast, descPostTimeLast,
	descXferTimeHist, descPostTimeHist,
	descBufferFull, descBufferUnread, descBufferCapacity, descReaderErrors, descAgents, descExpired, descCollectErrors,
}

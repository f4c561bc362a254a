package main

import "github.com/plexporter/plexporter/sdk"

// Identity (sysfs, every scrape).
var (
	descInfo = sdk.NewDesc("nvme_info", sdk.Gauge,
		"NVMe controller identity from sysfs; always 1.",
		"device", "serial", "model", "firmware_rev", "transport", "address", "cntlid")
	descControllerState = sdk.NewDesc("nvme_controller_state", sdk.Gauge,
		"NVMe controller state from sysfs (live, resetting, connecting, deleting, dead, ...); always 1, the state is the label.",
		"device", "state")
)

// Namespaces (sysfs, every scrape), as node_exporter 1.12's nvme collector
// has them, in bytes.
var (
	descNamespaceInfo = sdk.NewDesc("nvme_namespace_info", sdk.Gauge,
		"NVMe namespace identity from sysfs; always 1. namespace is the block device (nvme0n1, or a multipath path device nvme0c0n1), ana_state empty without ANA.",
		"device", "namespace", "nsid", "ana_state")
	descNamespaceSize = sdk.NewDesc("nvme_namespace_size_bytes", sdk.Gauge,
		"Size of the namespace in bytes (sysfs size, 512-byte sectors).", "device", "namespace").WithUnit("bytes")
	descNamespaceUsed = sdk.NewDesc("nvme_namespace_used_bytes", sdk.Gauge,
		"Space the namespace has allocated, in bytes (NUSE x logical block size); thin-provisioned namespaces report less than their size.", "device", "namespace").WithUnit("bytes")
	descNamespaceBlockSize = sdk.NewDesc("nvme_namespace_logical_block_size_bytes", sdk.Gauge,
		"Logical block size of the namespace in bytes.", "device", "namespace").WithUnit("bytes")
)

// Plugin health: the project's error-counter convention,
// nvme_collection_errors_total{collector}.
var descCollectionErrors = sdk.NewDesc("nvme_collection_errors_total", sdk.Counter,
	"Failures since the plugin started, by collector: controllers (listing class/nvme), identity (unreadable sysfs identity attributes), smart (failed SMART/Health log reads, missing privilege included).",
	"collector")

// Collector names: the collector label of nvme_collection_errors_total and
// of the partial errors sent to the host.
const (
	collectorControllers = "controllers" // listing <sysfs>/class/nvme
	collectorIdentity    = "identity"    // a controller's sysfs attributes
	collectorSMART       = "smart"       // the SMART/Health log page
)

// errorCollectors are the collector label values, exported from the first
// scrape on.
var errorCollectors = []string{collectorControllers, collectorIdentity, collectorSMART}

// SMART poller bookkeeping.
var (
	descSMARTAvailable = sdk.NewDesc("nvme_smart_available", sdk.Gauge,
		"1 if the latest SMART/Health log read of this controller succeeded, 0 if it failed (e.g. no CAP_SYS_ADMIN) or SMART is disabled.",
		"device")
	descSMARTLastSuccess = sdk.NewDesc("nvme_smart_last_success_timestamp_seconds", sdk.Gauge,
		"Unix time of the last successful SMART/Health log read; the SMART values are from that read.",
		"device").WithUnit("seconds")
)

// SMART / Health log (Log Identifier 02h), served from the poller's cache.
var (
	descCriticalWarning = sdk.NewDesc("nvme_smart_critical_warning", sdk.Gauge,
		"SMART critical warning bit (1 = raised): spare_low, temperature, reliability, readonly, volatile_backup_failed, pmr_unreliable.",
		"device", "serial", "bit")
	descMediaErrors = sdk.NewDesc("nvme_media_errors_total", sdk.Counter,
		"Unrecovered data integrity errors over the controller's life.", "device")
	descErrorLogEntries = sdk.NewDesc("nvme_error_log_entries_total", sdk.Counter,
		"Error information log entries over the controller's life.", "device")
	descPercentageUsed = sdk.NewDesc("nvme_percentage_used", sdk.Gauge,
		"Vendor estimate of the endurance used, in percent (0-255; may exceed 100).", "device")
	descAvailableSpare = sdk.NewDesc("nvme_available_spare_ratio", sdk.Gauge,
		"Remaining spare capacity (0-1).", "device").WithUnit("ratio")
	descAvailableSpareThreshold = sdk.NewDesc("nvme_available_spare_threshold_ratio", sdk.Gauge,
		"Spare capacity below which the controller raises the spare_low warning (0-1).", "device").WithUnit("ratio")
	descPowerOn = sdk.NewDesc("nvme_power_on_seconds_total", sdk.Counter,
		"Power-on time (the device counts whole hours).", "device").WithUnit("seconds")
	descPowerCycles = sdk.NewDesc("nvme_power_cycles_total", sdk.Counter,
		"Power cycles.", "device")
	descUnsafeShutdowns = sdk.NewDesc("nvme_unsafe_shutdowns_total", sdk.Counter,
		"Shutdowns without a shutdown notification.", "device")
	descDataRead = sdk.NewDesc("nvme_data_read_bytes_total", sdk.Counter,
		"Data read by the host (data units x 512000; the device rounds units up).", "device").WithUnit("bytes")
	descDataWritten = sdk.NewDesc("nvme_data_written_bytes_total", sdk.Counter,
		"Data written by the host (data units x 512000; the device rounds units up).", "device").WithUnit("bytes")
	descHostReadCommands = sdk.NewDesc("nvme_host_read_commands_total", sdk.Counter,
		"Read commands completed by the controller.", "device")
	descHostWriteCommands = sdk.NewDesc("nvme_host_write_commands_total", sdk.Counter,
		"Write commands completed by the controller.", "device")
	descControllerBusy = sdk.NewDesc("nvme_controller_busy_seconds_total", sdk.Counter,
		"Time the controller was busy with I/O commands (the device counts minutes).", "device").WithUnit("seconds")
	descTemperature = sdk.NewDesc("nvme_temperature_celsius", sdk.Gauge,
		"Temperature: sensor=composite, or sensor1..sensor8 for each implemented sensor.", "device", "sensor").WithUnit("celsius")
	descWarningTempTime = sdk.NewDesc("nvme_warning_temperature_seconds_total", sdk.Counter,
		"Time the composite temperature was at or above the warning threshold (the device counts minutes).", "device").WithUnit("seconds")
	descCriticalTempTime = sdk.NewDesc("nvme_critical_temperature_seconds_total", sdk.Counter,
		"Time the composite temperature was at or above the critical threshold (the device counts minutes).", "device").WithUnit("seconds")
	descThermalTransitions = sdk.NewDesc("nvme_thermal_throttle_transitions_total", sdk.Counter,
		"Transitions into host-controlled thermal management (level 1 = light, 2 = heavy throttling).", "device", "level")
	descThermalSeconds = sdk.NewDesc("nvme_thermal_throttle_seconds_total", sdk.Counter,
		"Time spent in host-controlled thermal management (level 1 = light, 2 = heavy throttling).", "device", "level").WithUnit("seconds")
)

// smartDescs are the families that need the SMART log; if the allowlist
// disables all of them the poller does not run at all.
var smartDescs = []*sdk.Desc{
	descSMARTAvailable, descSMARTLastSuccess,
	descCriticalWarning, descMediaErrors, descErrorLogEntries, descPercentageUsed,
	descAvailableSpare, descAvailableSpareThreshold, descPowerOn, descPowerCycles,
	descUnsafeShutdowns, descDataRead, descDataWritten, descHostReadCommands,
	descHostWriteCommands, descControllerBusy, descTemperature, descWarningTempTime,
	descCriticalTempTime, descThermalTransitions, descThermalSeconds,
}

// catalogue is every family the plugin writes, returned by Info.
var catalogue = append([]*sdk.Desc{descInfo, descControllerState, descCollectionErrors,
	descNamespaceInfo, descNamespaceSize, descNamespaceUsed, descNamespaceBlockSize}, smartDescs...)

// namespaceDescs are the families that need the namespace directories;
// when the allowlist disables all of them they are not read.
var namespaceDescs = []*sdk.Desc{descNamespaceInfo, descNamespaceSize, descNamespaceUsed, descNamespaceBlockSize}

// crusoeConflicts are the Crusoe exporter's names that metric_prefix
// crusoe_vm_ would give a family of this plugin although the Crusoe family
// has another type or meaning. Under such a prefix Configure leaves the
// family out (and logs it): the recording rules (plexporter-nvme.rules.yml)
// record the Crusoe name with its meaning.
var crusoeConflicts = map[string]string{
	"crusoe_vm_nvme_collection_errors_total": "the Crusoe exporter's unlabelled gauge of SMART read errors in one scrape, while this family is a cumulative counter by collector",
}

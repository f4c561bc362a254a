package main

import "github.com/plexporter/plexporter/sdk"

// Identity (sysfs, every scrape).
var (
	infoDesc = sdk.NewDesc("nvme_info", sdk.Gauge,
		"NVMe controller identity from sysfs; always 1.",
		"device", "serial", "model", "firmware_rev", "transport", "address")
	stateDesc = sdk.NewDesc("nvme_controller_state", sdk.Gauge,
		"NVMe controller state from sysfs (live, resetting, connecting, deleting, dead, ...); always 1, the state is the label.",
		"device", "state")
	collectionErrorsDesc = sdk.NewDesc("nvme_collection_errors_total", sdk.Counter,
		"Failed reads for this controller: SMART log reads (ioctl or decode) and unreadable sysfs identity attributes.",
		"device")
)

// SMART poller bookkeeping.
var (
	smartAvailableDesc = sdk.NewDesc("nvme_smart_available", sdk.Gauge,
		"1 if the latest SMART/Health log read of this controller succeeded, 0 if it failed (e.g. no CAP_SYS_ADMIN) or SMART is disabled.",
		"device")
	smartLastSuccessDesc = sdk.NewDesc("nvme_smart_last_success_timestamp_seconds", sdk.Gauge,
		"Unix time of the last successful SMART/Health log read; the SMART values are from that read.",
		"device").WithUnit("seconds")
)

// SMART / Health log (Log Identifier 02h), served from the poller's cache.
var (
	criticalWarningDesc = sdk.NewDesc("nvme_smart_critical_warning", sdk.Gauge,
		"SMART critical warning bit (1 = raised): spare_low, temperature, reliability, readonly, volatile_backup_failed, pmr_unreliable.",
		"device", "serial", "bit")
	mediaErrorsDesc = sdk.NewDesc("nvme_media_errors_total", sdk.Counter,
		"Unrecovered data integrity errors over the controller's life.", "device")
	errorLogEntriesDesc = sdk.NewDesc("nvme_error_log_entries_total", sdk.Counter,
		"Error information log entries over the controller's life.", "device")
	percentageUsedDesc = sdk.NewDesc("nvme_percentage_used", sdk.Gauge,
		"Vendor estimate of the endurance used, in percent (0-255; may exceed 100).", "device")
	availableSpareDesc = sdk.NewDesc("nvme_available_spare_ratio", sdk.Gauge,
		"Remaining spare capacity (0-1).", "device").WithUnit("ratio")
	availableSpareThresholdDesc = sdk.NewDesc("nvme_available_spare_threshold_ratio", sdk.Gauge,
		"Spare capacity below which the controller raises the spare_low warning (0-1).", "device").WithUnit("ratio")
	powerOnDesc = sdk.NewDesc("nvme_power_on_seconds_total", sdk.Counter,
		"Power-on time (the device counts whole hours).", "device").WithUnit("seconds")
	powerCyclesDesc = sdk.NewDesc("nvme_power_cycles_total", sdk.Counter,
		"Power cycles.", "device")
	unsafeShutdownsDesc = sdk.NewDesc("nvme_unsafe_shutdowns_total", sdk.Counter,
		"Shutdowns without a shutdown notification.", "device")
	dataReadDesc = sdk.NewDesc("nvme_data_read_bytes_total", sdk.Counter,
		"Data read by the host (data units x 512000; the device rounds units up).", "device").WithUnit("bytes")
	dataWrittenDesc = sdk.NewDesc("nvme_data_written_bytes_total", sdk.Counter,
		"Data written by the host (data units x 512000; the device rounds units up).", "device").WithUnit("bytes")
	hostReadCommandsDesc = sdk.NewDesc("nvme_host_read_commands_total", sdk.Counter,
		"Read commands completed by the controller.", "device")
	hostWriteCommandsDesc = sdk.NewDesc("nvme_host_write_commands_total", sdk.Counter,
		"Write commands completed by the controller.", "device")
	busyDesc = sdk.NewDesc("nvme_controller_busy_seconds_total", sdk.Counter,
		"Time the controller was busy with I/O commands (the device counts minutes).", "device").WithUnit("seconds")
	temperatureDesc = sdk.NewDesc("nvme_temperature_celsius", sdk.Gauge,
		"Temperature: sensor=composite, or sensor1..sensor8 for each implemented sensor.", "device", "sensor").WithUnit("celsius")
	warningTempTimeDesc = sdk.NewDesc("nvme_warning_temperature_seconds_total", sdk.Counter,
		"Time the composite temperature was at or above the warning threshold (the device counts minutes).", "device").WithUnit("seconds")
	criticalTempTimeDesc = sdk.NewDesc("nvme_critical_temperature_seconds_total", sdk.Counter,
		"Time the composite temperature was at or above the critical threshold (the device counts minutes).", "device").WithUnit("seconds")
	thermalTransitionsDesc = sdk.NewDesc("nvme_thermal_throttle_transitions_total", sdk.Counter,
		"Transitions into host-controlled thermal management (level 1 = light, 2 = heavy throttling).", "device", "level")
	thermalSecondsDesc = sdk.NewDesc("nvme_thermal_throttle_seconds_total", sdk.Counter,
		"Time spent in host-controlled thermal management (level 1 = light, 2 = heavy throttling).", "device", "level").WithUnit("seconds")
)

// smartDescs are the families that need the SMART log; if the allowlist
// disables all of them the poller does not run at all.
var smartDescs = []*sdk.Desc{
	smartAvailableDesc, smartLastSuccessDesc,
	criticalWarningDesc, mediaErrorsDesc, errorLogEntriesDesc, percentageUsedDesc,
	availableSpareDesc, availableSpareThresholdDesc, powerOnDesc, powerCyclesDesc,
	unsafeShutdownsDesc, dataReadDesc, dataWrittenDesc, hostReadCommandsDesc,
	hostWriteCommandsDesc, busyDesc, temperatureDesc, warningTempTimeDesc,
	criticalTempTimeDesc, thermalTransitionsDesc, thermalSecondsDesc,
}

func catalogue() []*sdk.Desc {
	return append([]*sdk.Desc{infoDesc, stateDesc, collectionErrorsDesc}, smartDescs...)
}

// writeSMART writes the decoded log page of one controller.
func writeSMART(w *sdk.Writer, dev, serial string, l *smartLog) {
	for bit, name := range criticalWarningBits {
		w.Gauge(criticalWarningDesc, float64(l.CriticalWarning>>bit&1), dev, serial, name)
	}
	w.Counter(mediaErrorsDesc, l.MediaErrors.Float64(), dev)
	w.Counter(errorLogEntriesDesc, l.ErrorLogEntries.Float64(), dev)
	w.Gauge(percentageUsedDesc, float64(l.PercentageUsed), dev)
	w.Gauge(availableSpareDesc, float64(l.AvailableSparePct)/100, dev)
	w.Gauge(availableSpareThresholdDesc, float64(l.AvailableSpareThreshPct)/100, dev)
	w.Counter(powerOnDesc, l.PowerOnHours.Float64()*secondsPerHour, dev)
	w.Counter(powerCyclesDesc, l.PowerCycles.Float64(), dev)
	w.Counter(unsafeShutdownsDesc, l.UnsafeShutdowns.Float64(), dev)
	w.Counter(dataReadDesc, l.DataUnitsRead.Float64()*bytesPerDataUnit, dev)
	w.Counter(dataWrittenDesc, l.DataUnitsWritten.Float64()*bytesPerDataUnit, dev)
	w.Counter(hostReadCommandsDesc, l.HostReadCommands.Float64(), dev)
	w.Counter(hostWriteCommandsDesc, l.HostWriteCommands.Float64(), dev)
	w.Counter(busyDesc, l.ControllerBusyMin.Float64()*secondsPerMinute, dev)
	if l.CompositeTemperatureK != 0 {
		w.Gauge(temperatureDesc, kelvinToCelsius(l.CompositeTemperatureK), dev, "composite")
	}
	for i, k := range l.TemperatureSensorK {
		if k != 0 {
			w.Gauge(temperatureDesc, kelvinToCelsius(k), dev, sensorNames[i])
		}
	}
	w.Counter(warningTempTimeDesc, float64(l.WarningTempTimeMin)*secondsPerMinute, dev)
	w.Counter(criticalTempTimeDesc, float64(l.CriticalTempTimeMn)*secondsPerMinute, dev)
	w.Counter(thermalTransitionsDesc, float64(l.ThermalMgmtT1Transitions), dev, "1")
	w.Counter(thermalTransitionsDesc, float64(l.ThermalMgmtT2Transitions), dev, "2")
	w.Counter(thermalSecondsDesc, float64(l.ThermalMgmtT1Seconds), dev, "1")
	w.Counter(thermalSecondsDesc, float64(l.ThermalMgmtT2Seconds), dev, "2")
}

var sensorNames = [8]string{"sensor1", "sensor2", "sensor3", "sensor4", "sensor5", "sensor6", "sensor7", "sensor8"}

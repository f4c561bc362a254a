package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// QEMU's controller, as run.sh starts it (-device nvme,serial=LAB123).
const (
	nvmeDevice = "nvme0"
	nvmeSerial = "LAB123"
	nvmeSysfs  = "/sys/class/nvme/nvme0"
)

func checkNVMeInfo(l *lab) error {
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	s := e.series("nvme_info", "device", nvmeDevice)
	if len(s) != 1 {
		return fmt.Errorf("%d series nvme_info{device=%q}, want 1", len(s), nvmeDevice)
	}
	var errs []error
	for _, attr := range []string{"serial", "model", "firmware_rev", "transport", "address", "cntlid"} {
		raw, err := os.ReadFile(nvmeSysfs + "/" + attr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if want, got := strings.TrimSpace(string(raw)), label(s[0], attr); got != want {
			errs = append(errs, fmt.Errorf("nvme_info %s=%q, sysfs %s says %q", attr, got, attr, want))
		}
	}
	if got := label(s[0], "serial"); got != nvmeSerial {
		errs = append(errs, fmt.Errorf("nvme_info serial=%q, want QEMU's %q", got, nvmeSerial))
	}
	l.note("nvme_info model=%q firmware_rev=%q transport=%q", label(s[0], "model"), label(s[0], "firmware_rev"), label(s[0], "transport"))
	return errors.Join(errs...)
}

// smartField maps a field of `nvme smart-log -o json` to the plugin's
// family and the factor from the log's unit to the family's.
type smartField struct {
	json, family string
	factor       float64
}

var smartFields = []smartField{
	{"data_units_read", "nvme_data_read_bytes_total", 512000}, // 1000 512-byte units (NVMe base spec)
	{"data_units_written", "nvme_data_written_bytes_total", 512000},
	{"host_read_commands", "nvme_host_read_commands_total", 1},
	{"host_write_commands", "nvme_host_write_commands_total", 1},
	{"controller_busy_time", "nvme_controller_busy_seconds_total", 60}, // minutes
	{"power_cycles", "nvme_power_cycles_total", 1},
	{"power_on_hours", "nvme_power_on_seconds_total", 3600},
	{"unsafe_shutdowns", "nvme_unsafe_shutdowns_total", 1},
	{"media_errors", "nvme_media_errors_total", 1},
	{"num_err_log_entries", "nvme_error_log_entries_total", 1},
	{"warning_temp_time", "nvme_warning_temperature_seconds_total", 60},
	{"critical_comp_time", "nvme_critical_temperature_seconds_total", 60},
	{"percent_used", "nvme_percentage_used", 1},
}

// checkNVMeSMART compares the SMART values the sandboxed plugin read with
// NVME_IOCTL_ADMIN_CMD against nvme-cli's reading of the same log. guest.sh
// did its I/O before the host started and nothing touches the disk until the
// ebpf checks, so the counters are the same in both readings.
func checkNVMeSMART(l *lab) error {
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	if v, err := e.value("nvme_smart_available", "device", nvmeDevice); err != nil || v != 1 {
		return fmt.Errorf("nvme_smart_available{device=%q} = %v (%v): the plugin did not read the SMART log through the admin ioctl", nvmeDevice, v, err)
	}
	out, err := run("nvme", "smart-log", "/dev/"+nvmeDevice, "-o", "json")
	if err != nil {
		return err
	}
	log, err := parseSMARTJSON(out)
	if err != nil {
		return err
	}
	var errs []error
	compared := 0
	for _, f := range smartFields {
		want, ok := log[f.json]
		if !ok {
			errs = append(errs, fmt.Errorf("nvme smart-log has no %q", f.json))
			continue
		}
		got, err := e.value(f.family, "device", nvmeDevice)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got != want*f.factor {
			errs = append(errs, fmt.Errorf("%s = %v, nvme smart-log %s = %v (x %v = %v)", f.family, got, f.json, want, f.factor, want*f.factor))
		}
		compared++
	}
	if spare, ok := log["avail_spare"]; ok {
		got, err := e.value("nvme_available_spare_ratio", "device", nvmeDevice)
		if err != nil || got != spare/100 {
			errs = append(errs, fmt.Errorf("nvme_available_spare_ratio = %v (%v), nvme smart-log avail_spare = %v%%", got, err, spare))
		}
		compared++
	}
	if k, ok := log["temperature"]; ok {
		// nvme-cli prints the composite temperature in kelvins.
		want := k - 273.15
		got, err := e.value("nvme_temperature_celsius", "device", nvmeDevice, "sensor", "composite")
		if err != nil || math.Abs(got-want) > 1e-9 {
			errs = append(errs, fmt.Errorf("nvme_temperature_celsius{sensor=\"composite\"} = %v (%v), nvme smart-log temperature %v K = %v °C", got, err, k, want))
		}
		compared++
	}
	// critical_warning is a bit field; the plugin has one series per bit.
	if cw, ok := log["critical_warning"]; ok {
		for bit, name := range []string{"spare_low", "temperature", "reliability", "readonly", "volatile_backup_failed"} {
			want := float64(int(cw) >> bit & 1)
			if got, err := e.value("nvme_smart_critical_warning", "device", nvmeDevice, "bit", name); err != nil || got != want {
				errs = append(errs, fmt.Errorf("nvme_smart_critical_warning{bit=%q} = %v (%v), nvme smart-log critical_warning %v has bit %d = %v", name, got, err, cw, bit, want))
			}
		}
		compared++
	}
	l.note("%d SMART values compared with nvme smart-log (data_units_read %v, host_read_commands %v, temperature %v K)", compared, log["data_units_read"], log["host_read_commands"], log["temperature"])
	return errors.Join(errs...)
}

// parseSMARTJSON reads nvme-cli's JSON smart-log: numbers, some of them
// (128-bit counters) possibly printed as strings.
func parseSMARTJSON(out string) (map[string]float64, error) {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("nvme smart-log -o json: %w: %.200s", err, out)
	}
	vals := map[string]float64{}
	for k, v := range raw {
		var s string
		switch v := v.(type) {
		case json.Number:
			s = v.String()
		case string:
			s = v
		default:
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64); err == nil {
			vals[k] = f
		}
	}
	return vals, nil
}

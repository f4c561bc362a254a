package sdk

import (
	"fmt"
	"regexp"
)

// Devices is the host's device filter (--device.include, --device.exclude):
// which devices, by the name a series' "device" label carries (mlx5_0,
// nvme0, sda), the operator wants. The host removes the series of a device
// it rejects either way; a plugin asks Allow before it reads or queries a
// device at all, so that an excluded device is not touched (no sysfs read,
// ioctl or netlink request about it). A nil *Devices allows every device.
type Devices struct {
	include, exclude *regexp.Regexp
}

// NewDevices compiles the two expressions (RE2, unanchored, as the host's
// flags; empty means no filter). An error names the field.
func NewDevices(include, exclude string) (*Devices, error) {
	if include == "" && exclude == "" {
		return nil, nil
	}
	d := &Devices{}
	for _, x := range []struct {
		field, expr string
		dst         **regexp.Regexp
	}{{"device_include", include, &d.include}, {"device_exclude", exclude, &d.exclude}} {
		if x.expr == "" {
			continue
		}
		re, err := regexp.Compile(x.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", x.field, err)
		}
		*x.dst = re
	}
	return d, nil
}

// Allow reports whether the device is wanted: include (when set) matches
// it and exclude (when set) does not.
func (d *Devices) Allow(device string) bool {
	if d == nil {
		return true
	}
	if d.include != nil && !d.include.MatchString(device) {
		return false
	}
	return d.exclude == nil || !d.exclude.MatchString(device)
}

package guard

import "regexp"

// DeviceLabel is the label a DeviceFilter looks at: every shipped plugin
// names the device a series is about with it (the RDMA device, the NVMe
// controller, the disk), whichever plugin writes the family.
const DeviceLabel = "device"

// DeviceFilter selects series by their device label, for every plugin at
// once (--device.include, --device.exclude): excluding mlx5_1 removes the
// rdma plugin's port counters and the ethtool plugin's rdma_* families of
// that device alike. A series without a device label is not filtered. Like
// the allowlist, a filtered series is not wanted rather than dropped: it is
// not a plugin's fault and is not counted as a drop.
type DeviceFilter struct {
	// Include, when set, keeps only devices it matches; Exclude removes the
	// devices it matches (after Include). Unanchored, as node_exporter's
	// device-include/device-exclude flags.
	Include, Exclude *regexp.Regexp
}

// Allow tells whether series of device d are exposed.
func (f *DeviceFilter) Allow(d string) bool {
	if f == nil {
		return true
	}
	if f.Include != nil && !f.Include.MatchString(d) {
		return false
	}
	return f.Exclude == nil || !f.Exclude.MatchString(d)
}

// active tells whether the filter can remove anything.
func (f *DeviceFilter) active() bool { return f != nil && (f.Include != nil || f.Exclude != nil) }

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// recordingStd answers every netdev with no standard statistics and
// counts the netdevs it was asked about, as the ethtool netlink source
// would be queried.
type recordingStd struct{ calls map[string]int }

func (r *recordingStd) StandardStats(_ context.Context, netdev string, _ stdRequest) (*stdStats, error) {
	r.calls[netdev]++
	return &stdStats{}, nil
}

// The host's --device.exclude reaches the plugin (ConfigureRequest
// device_exclude), and an excluded RDMA device is not touched: no ioctl and
// no ethtool netlink request about its netdev, for any family, while the
// other devices' netdevs still are read. rxe0 stands for mlx5_bond_0: a
// device whose netdev (eno1, like a bond) only its own port's GID table
// names, not the netdev's PCI function.
func TestDeviceExcludeNotQueried(t *testing.T) {
	sys := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	for _, c := range []struct {
		exclude, netdev string
	}{
		{"^mlx5_0$", "ens1f0np0"},
		{"^rxe0$", "eno1"},
	} {
		t.Run(c.exclude, func(t *testing.T) {
			src := newFakeSource(t, fixtureFiles())
			std := &recordingStd{calls: map[string]int{}}
			p := newTestPlugin(src)
			p.std = std
			res := sdktest.Run(t, p, sdktest.Options{
				Sysfs:         sys,
				Config:        map[string]any{"driver_stats": true, "require_device": false},
				DeviceExclude: c.exclude,
			})
			if src.calls[c.netdev] != 0 || std.calls[c.netdev] != 0 {
				t.Errorf("--device.exclude=%s: %s queried %d times by ioctl and %d times by ethtool netlink, want 0",
					c.exclude, c.netdev, src.calls[c.netdev], std.calls[c.netdev])
			}
			// The other devices are still read: ionic_0's enp68s0 by both.
			if src.calls["enp68s0"] == 0 || std.calls["enp68s0"] == 0 {
				t.Errorf("enp68s0 not read (ioctl %d, netlink %d): the filter removed more than %s", src.calls["enp68s0"], std.calls["enp68s0"], c.exclude)
			}
			dev := strings.Trim(c.exclude, "^$")
			for _, mf := range res.Families(t) {
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if (l.GetName() == "device" && l.GetValue() == dev) || (l.GetName() == "netdev" && l.GetValue() == c.netdev) {
							t.Errorf("%s{%s} written for an excluded device", mf.GetName(), labelKey(m))
							break
						}
					}
				}
			}
		})
	}
	// Without the filter the same netdevs are read: the test above is
	// about the filter, not the fixture.
	src := newFakeSource(t, fixtureFiles())
	std := &recordingStd{calls: map[string]int{}}
	p := newTestPlugin(src)
	p.std = std
	sdktest.Run(t, p, sdktest.Options{Sysfs: sys, Config: map[string]any{"driver_stats": true, "require_device": false}})
	for _, n := range []string{"ens1f0np0", "eno1"} {
		if src.calls[n] == 0 || std.calls[n] == 0 {
			t.Errorf("without a device filter %s is not read (ioctl %d, netlink %d)", n, src.calls[n], std.calls[n])
		}
	}
}

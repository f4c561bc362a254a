package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/plexporter/plexporter/plugins/internal/rdmasysfs"
	"github.com/plexporter/plexporter/plugins/internal/sysfs"
	"github.com/plexporter/plexporter/sdk"
)

// rdmaPort is one RDMA (device, port) and what the ethtool families need to
// know about it, from the shared RDMA sysfs walk (plugins/internal/rdmasysfs) plus
// class/net/<netdev>/phys_port_name for representor detection.
type rdmaPort struct {
	Device, Port, NetDev, LinkLayer string
	PCIAddr                         string
	IsVF                            bool
	HasSRIOV                        bool
}

// discoverRDMAPorts lists every port of every RDMA device, sorted by device
// then port number. A missing class/infiniband means "no RDMA devices" (err
// nil), an unreadable one is err. A device without a ports directory has no
// ports; one whose ports cannot be listed (permission denied: the device
// directories behind the class links are not readable) contributes none and
// its error is in devErrs, because its families silently missing would look
// like a NIC without counters. A device the host's device filter rejects
// is skipped before anything of it is read, and so is a port whose netdev
// is in skipNetdevs (rejectedNetdevs).
func discoverRDMAPorts(sysfsRoot string, devices *sdk.Devices, skipNetdevs map[string]bool) (ports []rdmaPort, devErrs []error, err error) {
	class := rdmasysfs.Class{Sysfs: sysfsRoot}
	devs, err := class.Devices()
	if err != nil {
		return nil, nil, err
	}
	for _, dev := range devs {
		if !devices.Allow(dev) {
			continue
		}
		ps, err := class.Ports(dev)
		if err != nil {
			devErrs = append(devErrs, fmt.Errorf("list ports of %s: %w", dev, err))
			continue
		}
		id := class.Identify(dev)
		for _, p := range ps {
			netdev := p.NetDev()
			if skipNetdevs[netdev] {
				continue
			}
			ports = append(ports, rdmaPort{
				Device:    dev,
				Port:      strconv.Itoa(p.Num),
				NetDev:    netdev,
				LinkLayer: p.LinkLayer(),
				PCIAddr:   id.PCIAddr,
				IsVF:      id.IsVF,
				HasSRIOV:  id.SRIOV,
			})
		}
	}
	return ports, devErrs, nil
}

var (
	pciBDFPattern         = regexp.MustCompile(`(?i)^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$`)
	representorPortName   = regexp.MustCompile(`^(c[0-9]+)?pf[0-9]+(hpf|(vf|sf)[0-9]+)$`)
	safeNetdevNamePattern = regexp.MustCompile(`^[^/\\:]+$`)
)

// ethernetOwners counts, per netdev, the non-VF Ethernet (device, port)
// pairs that resolve to it; vPort counters are only attributable when the
// count is exactly one.
func ethernetOwners(ports []rdmaPort) map[string]int {
	owners := map[string]int{}
	for _, p := range ports {
		if p.IsVF || p.LinkLayer != "Ethernet" || p.NetDev == "" {
			continue
		}
		owners[p.NetDev]++
	}
	return owners
}

// physPortName reads class/net/<netdev>/phys_port_name; missing and
// unreadable (EOPNOTSUPP on VFs) both give "".
func physPortName(sysfsRoot, netdev string) string {
	if !safeNetdevNamePattern.MatchString(netdev) || strings.Contains(netdev, "..") {
		return ""
	}
	v, _ := sysfs.ReadAttr(filepath.Join(sysfsRoot, "class", "net", netdev, "phys_port_name"))
	return v
}

// skipVPort reports whether the vPort RDMA families must be omitted for p.
func skipVPort(sysfsRoot string, p rdmaPort, owners map[string]int) bool {
	return !pciBDFPattern.MatchString(p.PCIAddr) ||
		!p.HasSRIOV ||
		owners[p.NetDev] != 1 ||
		representorPortName.MatchString(physPortName(sysfsRoot, p.NetDev))
}

// rejectedNetdevs returns the netdevs of the RDMA devices the host's device
// filter rejects (nil without a filter): excluded means not touched, so
// no family queries them (ioctl or netlink), although the ethtool_* families
// name a netdev, not the device. What it reads of a rejected device is only
// its ports' netdev names (gid_attrs/ndevs, the RDMA core's GID table; not
// the driver), and class/net/<if>/device/infiniband from the netdev's side,
// for a netdev whose port has no GID entry (link down). An unreadable
// class/infiniband is reported by discoverRDMAPorts; the netdev side still
// finds the netdevs of PCI devices then.
func rejectedNetdevs(sysfsRoot string, devices *sdk.Devices) map[string]bool {
	if devices == nil {
		return nil
	}
	class := rdmasysfs.Class{Sysfs: sysfsRoot}
	devs, _ := class.Devices()
	out := map[string]bool{}
	for _, dev := range devs {
		if devices.Allow(dev) {
			continue
		}
		ps, _ := class.Ports(dev) // unlistable: the netdev side below still finds PCI netdevs
		for _, p := range ps {
			if n := p.NetDev(); n != "" {
				out[n] = true
			}
		}
	}
	netDir := filepath.Join(sysfsRoot, "class", "net")
	netdevs, _ := sysfs.Names(netDir) // unreadable: listNetdevs reports it
	for _, n := range netdevs {
		ibdevs, _ := sysfs.Names(filepath.Join(netDir, n, "device", "infiniband")) // none: not a PCI RDMA netdev
		for _, dev := range ibdevs {
			if !devices.Allow(dev) {
				out[n] = true
			}
		}
	}
	return out
}

// listNetdevs returns the netdevs of class/net selected by the include and
// exclude regexes and, with require_device, only those with a `device`
// link (hardware NICs and VFs; not lo, veth, bridges, bonds, tunnels).
func listNetdevs(sysfsRoot string, c *config, skip map[string]bool) ([]string, error) {
	dir := filepath.Join(sysfsRoot, "class", "net")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no network class at all: no netdevs
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if skip[n] {
			continue // a rejected RDMA device's netdev (rejectedNetdevs)
		}
		if c.include != nil && !c.include.MatchString(n) {
			continue
		}
		if c.exclude != nil && c.exclude.MatchString(n) {
			continue
		}
		if c.requireDevice() {
			if _, err := os.Lstat(filepath.Join(dir, n, "device")); err != nil {
				continue
			}
		}
		out = append(out, n)
	}
	return out, nil
}

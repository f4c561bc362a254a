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

	"github.com/plexporter/plexporter/internal/rdmasysfs"
	"github.com/plexporter/plexporter/internal/sysfs"
)

// rdmaPort is one RDMA (device, port) and what the ethtool families need to
// know about it, from the shared RDMA sysfs walk (internal/rdmasysfs) plus
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
// like a NIC without counters.
func discoverRDMAPorts(sysfsRoot string) (ports []rdmaPort, devErrs []error, err error) {
	class := rdmasysfs.Class{Sysfs: sysfsRoot}
	devs, err := class.Devices()
	if err != nil {
		return nil, nil, err
	}
	for _, dev := range devs {
		ps, err := class.Ports(dev)
		if err != nil {
			devErrs = append(devErrs, fmt.Errorf("list ports of %s: %w", dev, err))
			continue
		}
		id := class.Identify(dev)
		for _, p := range ps {
			ports = append(ports, rdmaPort{
				Device:    dev,
				Port:      strconv.Itoa(p.Num),
				NetDev:    p.NetDev(),
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

// listNetdevs returns the netdevs of class/net selected by the include and
// exclude regexes and, with require_device, only those with a `device`
// link (hardware NICs and VFs; not lo, veth, bridges, bonds, tunnels).
func listNetdevs(sysfsRoot string, c *config) ([]string, error) {
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

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// rdmaPort is one RDMA (device, port) and what the ethtool families need to
// know about it, read from sysfs:
//
//	class/infiniband/<dev>/device            -> PCI function (basename = BDF)
//	class/infiniband/<dev>/device/physfn     -> present only on SR-IOV VFs
//	class/infiniband/<dev>/device/sriov_totalvfs (SR-IOV capable PF)
//	class/infiniband/<dev>/ports/<n>/link_layer
//	class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/<i> (first non-empty = netdev)
//	class/net/<netdev>/phys_port_name        (representor detection)
type rdmaPort struct {
	Device, Port, NetDev, LinkLayer string
	PCIAddr                         string
	IsVF                            bool
	HasSRIOV                        bool
}

// discoverRDMAPorts lists every port of every RDMA device, sorted by device
// then port. A missing class/infiniband means "no RDMA devices".
func discoverRDMAPorts(sysfs string) ([]rdmaPort, error) {
	classDir := filepath.Join(sysfs, "class", "infiniband")
	devs, err := os.ReadDir(classDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var ports []rdmaPort
	for _, d := range devs {
		devDir := filepath.Join(classDir, d.Name())
		var pci string
		if link, err := os.Readlink(filepath.Join(devDir, "device")); err == nil {
			pci = filepath.Base(link)
		}
		// A BDF without physfn is treated as not-VF (as the seed does).
		_, vfErr := os.Readlink(filepath.Join(devDir, "device", "physfn"))
		isVF := vfErr == nil
		_, sriovErr := os.Stat(filepath.Join(devDir, "device", "sriov_totalvfs"))
		hasSRIOV := sriovErr == nil

		portEntries, err := os.ReadDir(filepath.Join(devDir, "ports"))
		if err != nil {
			continue
		}
		nums := make([]int, 0, len(portEntries))
		for _, p := range portEntries {
			if n, err := strconv.Atoi(p.Name()); err == nil {
				nums = append(nums, n)
			}
		}
		sort.Ints(nums)
		for _, n := range nums {
			portDir := filepath.Join(devDir, "ports", strconv.Itoa(n))
			ports = append(ports, rdmaPort{
				Device:    d.Name(),
				Port:      strconv.Itoa(n),
				NetDev:    portNetDev(portDir),
				LinkLayer: readTrimmed(filepath.Join(portDir, "link_layer")),
				PCIAddr:   pci,
				IsVF:      isVF,
				HasSRIOV:  hasSRIOV,
			})
		}
	}
	return ports, nil
}

// portNetDev returns the first non-empty gid_attrs/ndevs entry (unused
// entries fail with EINVAL on a host; they are skipped).
func portNetDev(portDir string) string {
	dir := filepath.Join(portDir, "gid_attrs", "ndevs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if v := readTrimmed(filepath.Join(dir, e.Name())); v != "" {
			return v
		}
	}
	return ""
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
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
func physPortName(sysfs, netdev string) string {
	if !safeNetdevNamePattern.MatchString(netdev) || strings.Contains(netdev, "..") {
		return ""
	}
	return readTrimmed(filepath.Join(sysfs, "class", "net", netdev, "phys_port_name"))
}

// skipVPort reports whether the vPort RDMA families must be omitted for p.
func skipVPort(sysfs string, p rdmaPort, owners map[string]int) bool {
	return !pciBDFPattern.MatchString(p.PCIAddr) ||
		!p.HasSRIOV ||
		owners[p.NetDev] != 1 ||
		representorPortName.MatchString(physPortName(sysfs, p.NetDev))
}

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/plexporter/plexporter/plugins/internal/sysfs"
)

// Device kinds: the device_kind label, saying which plugins' device label
// a series joins with.
const (
	kindPCI    = "pci"    // a PCI function address (SR-IOV VFs, NVMe controllers, RDMA HCAs)
	kindRDMA   = "rdma"   // an RDMA device name: rdma_*{device}
	kindNetdev = "netdev" // a network interface name: ethtool's device
	kindNVMe   = "nvme"   // an NVMe controller: nvme_*{device}
	kindOther  = "other"  // an ID sysfs does not know (a GPU UUID, an index)
)

// device is one kernel device a device ID stands for.
type device struct {
	Kind, Name, PCIAddr string
}

// pciAddress matches a PCI function address as sysfs names it
// (domain:bus:device.function), the form SR-IOV device plugins report.
var pciAddress = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// resolver maps the device IDs of device plugins to the devices other
// plugins report, from sysfs. It holds no state: every refresh resolves
// again, so a VF rebound to another driver is seen at the next one.
type resolver struct{ sysfs string }

// resolve returns the devices an ID stands for: a PCI address gives the
// function itself and every RDMA device, netdev and NVMe controller sysfs
// has behind it; an RDMA device, netdev or controller name gives itself
// with its PCI function; anything else is one device of kind other.
func (r resolver) resolve(id string) []device {
	if pciAddress.MatchString(id) {
		addr := strings.ToLower(id)
		out := []device{{Kind: kindPCI, Name: addr, PCIAddr: addr}}
		fn := filepath.Join(r.sysfs, "bus", "pci", "devices", addr)
		for _, sub := range []struct{ dir, kind string }{{"infiniband", kindRDMA}, {"net", kindNetdev}, {"nvme", kindNVMe}} {
			names, _ := sysfs.Names(filepath.Join(fn, sub.dir)) // absent: nothing of that kind behind it
			for _, n := range names {
				out = append(out, device{Kind: sub.kind, Name: n, PCIAddr: addr})
			}
		}
		return out
	}
	// A name is looked up as one path element only: a device ID of
	// "../../x" must not make the plugin probe other sysfs paths.
	if id != "" && id != "." && id != ".." && !strings.ContainsRune(id, '/') {
		for _, c := range []struct{ class, kind string }{{"infiniband", kindRDMA}, {"net", kindNetdev}, {"nvme", kindNVMe}} {
			dir := filepath.Join(r.sysfs, "class", c.class, id)
			if _, err := os.Lstat(dir); err == nil {
				return []device{{Kind: c.kind, Name: id, PCIAddr: pciFunction(dir)}}
			}
		}
	}
	return []device{{Kind: kindOther, Name: id}}
}

// pciFunction returns the PCI address of a class device's function, ""
// for a virtual device (rxe, a bridge, a TCP NVMe controller).
func pciFunction(classDir string) string {
	link := filepath.Join(classDir, "device")
	target, err := os.Readlink(link)
	if err != nil {
		return ""
	}
	if _, err := os.Stat(link); err != nil {
		return "" // a dangling link names no function
	}
	if base := filepath.Base(target); pciAddress.MatchString(base) {
		return base
	}
	return ""
}

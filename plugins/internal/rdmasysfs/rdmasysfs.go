// Package rdmasysfs walks the kernel's RDMA device class in sysfs, the one
// walk the rdma and ethtool plugins share:
//
//	class/infiniband/<device>                  a device, in name order
//	class/infiniband/<device>/device           -> its PCI function (basename = address)
//	class/infiniband/<device>/device/physfn    present only on SR-IOV virtual functions
//	class/infiniband/<device>/device/sriov_totalvfs  present on SR-IOV capable PFs
//	bus/pci/devices/<pf>/infiniband/<device>   the RDMA device of a VF's PF
//	class/infiniband/<device>/ports/<n>        ports, in numeric order
//	class/infiniband/<device>/ports/<n>/gid_attrs/ndevs/<i>  the port's netdev
//
// Readers of a port's counters and states build on Port.Dir.
package rdmasysfs

import (
	"os"
	"path/filepath"

	"github.com/plexporter/plexporter/plugins/internal/sysfs"
)

// Class is the RDMA device class of the sysfs mounted at Sysfs.
type Class struct {
	Sysfs string // sysfs mount point, e.g. /sys
}

// Dir is the class directory, <sysfs>/class/infiniband.
func (c Class) Dir() string { return filepath.Join(c.Sysfs, "class", "infiniband") }

// DeviceDir is the directory of one device (a symlink into devices/).
func (c Class) DeviceDir(device string) string { return filepath.Join(c.Dir(), device) }

// Devices lists the RDMA devices in name order. A missing class directory
// means no RDMA stack is loaded: no devices and no error.
func (c Class) Devices() ([]string, error) { return sysfs.Names(c.Dir()) }

// Identity is what sysfs says about the PCI function behind an RDMA device.
// It does not change while the device exists, so callers may cache it.
type Identity struct {
	// PCIAddr is the function's address ("0000:17:00.2"), the basename of
	// the device link; "" for software devices (rxe, siw) without one and
	// for a link whose target does not exist.
	PCIAddr string
	// IsVF is set when the function is an SR-IOV virtual function (it has
	// a physfn link). A function without physfn counts as not a VF.
	IsVF bool
	// PFDevice is, for a VF, the RDMA device of its physical function (the
	// first under bus/pci/devices/<pf>/infiniband); "" if it has none.
	PFDevice string
	// SRIOV is set when the function can create virtual functions (it has
	// sriov_totalvfs).
	SRIOV bool
}

// Identify reads a device's Identity. Missing links and files are the
// zero values: a software device has no PCI function at all.
func (c Class) Identify(device string) Identity {
	var id Identity
	devLink := filepath.Join(c.DeviceDir(device), "device")
	// A link that leads nowhere (the function was removed, or a fixture or
	// container mount lacks devices/) names no PCI function: the device is
	// treated like a virtual one, never labelled with the dead link's name.
	if target, err := os.Readlink(devLink); err == nil {
		if _, err := os.Stat(devLink); err == nil {
			id.PCIAddr = filepath.Base(target)
		}
	}
	if target, err := os.Readlink(filepath.Join(devLink, "physfn")); err == nil {
		id.IsVF = true
		pf := filepath.Base(target)
		if ents, err := os.ReadDir(filepath.Join(c.Sysfs, "bus", "pci", "devices", pf, "infiniband")); err == nil && len(ents) > 0 {
			id.PFDevice = ents[0].Name()
		}
	}
	if _, err := os.Stat(filepath.Join(devLink, "sriov_totalvfs")); err == nil {
		id.SRIOV = true
	}
	return id
}

// Port is one port directory of a device.
type Port struct {
	Device string
	Num    int
	Dir    string // <device dir>/ports/<Num>
}

// Ports lists a device's ports in numeric order (1, 2, ..., 10, not 1, 10,
// 2). Port numbers start at 1, except on IB switches, whose management port
// is 0. Entries that are not decimal port numbers are skipped. A device
// without a ports directory has no ports and no error.
func (c Class) Ports(device string) ([]Port, error) {
	dir := filepath.Join(c.DeviceDir(device), "ports")
	entries, err := sysfs.Numbered(dir, "")
	if err != nil {
		return nil, err
	}
	var ports []Port
	for _, e := range entries {
		ports = append(ports, Port{Device: device, Num: e.Num, Dir: filepath.Join(dir, e.Name)})
	}
	return ports, nil
}

// NetDev returns the port's network device: the netdev of its lowest
// populated GID table entry (gid_attrs/ndevs/<i>, in numeric order), or ""
// for ports without one (InfiniBand link layer, or no netdev bound).
//
// Why the lowest index: the kernel reserves the first entries of a RoCE
// port's GID table for its default GIDs, one per GID type, and fills them
// from the port's own netdev (gid_table_reserve_default and
// ib_cache_gid_set_default_gid in drivers/infiniband/core/cache.c); GIDs of
// IP addresses and of upper devices (VLANs, macvlans) take later free
// slots. Unpopulated entries fail to read (EINVAL) and are skipped. A
// directory listing is in name order (0, 1, 10, 100, 11, ...), which can put
// a VLAN device's entry 10 before the port's own entry 2, so the order is
// numeric, never the listing's.
func (p Port) NetDev() string {
	dir := filepath.Join(p.Dir, "gid_attrs", "ndevs")
	entries, _ := sysfs.Numbered(dir, "") // unreadable: no netdev
	return firstNetDev(entries, func(name string) (string, error) { return sysfs.ReadAttr(filepath.Join(dir, name)) })
}

// NetDevIn is NetDev for a reader that holds the port's gid_attrs/ndevs
// directory open (refreshed by the caller); buf is its scratch space.
func NetDevIn(ndevs *sysfs.Dir, buf *sysfs.Buffer) string {
	return firstNetDev(ndevs.Numbered(""), func(name string) (string, error) { return ndevs.ReadAttr(name, buf) })
}

// firstNetDev is the value of the lowest-numbered ndevs entry that reads
// as a name; see NetDev for why the lowest.
func firstNetDev(entries []sysfs.Entry, read func(name string) (string, error)) string {
	for _, e := range entries {
		if v, err := read(e.Name); err == nil && v != "" {
			return v
		}
	}
	return ""
}

// LinkLayer returns the port's link layer ("InfiniBand", "Ethernet"), ""
// if it cannot be read.
func (p Port) LinkLayer() string {
	v, _ := sysfs.ReadAttr(filepath.Join(p.Dir, "link_layer"))
	return v
}

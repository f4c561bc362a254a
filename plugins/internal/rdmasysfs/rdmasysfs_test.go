package rdmasysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

type tree struct {
	t    *testing.T
	root string
}

func (tr tree) file(rel, content string) {
	tr.t.Helper()
	p := filepath.Join(tr.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr tree) dir(rel string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Join(tr.root, rel), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr tree) link(rel, target string) {
	tr.t.Helper()
	p := filepath.Join(tr.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		tr.t.Fatal(err)
	}
}

// newTree builds a class with an SR-IOV PF (mlx5_0), one of its VFs
// (mlx5_2) and a software device (rxe0), linked as the kernel links them.
func newTree(t *testing.T) (tree, Class) {
	tr := tree{t, t.TempDir()}
	pf := "devices/pci0000:16/0000:16:02.0/0000:17:00.0"
	vf := "devices/pci0000:16/0000:16:02.0/0000:17:00.2"
	tr.file(pf+"/sriov_totalvfs", "8\n")
	tr.dir(pf + "/infiniband/mlx5_0/ports/1")
	tr.dir(vf + "/infiniband/mlx5_2/ports/1")
	tr.link(vf+"/physfn", "../0000:17:00.0")
	tr.dir("devices/virtual/infiniband/rxe0/ports/1")
	tr.link("class/infiniband/mlx5_0", "../../"+pf+"/infiniband/mlx5_0")
	tr.link("class/infiniband/mlx5_2", "../../"+vf+"/infiniband/mlx5_2")
	tr.link("class/infiniband/rxe0", "../../devices/virtual/infiniband/rxe0")
	tr.link(pf+"/infiniband/mlx5_0/device", "../../../0000:17:00.0")
	tr.link(vf+"/infiniband/mlx5_2/device", "../../../0000:17:00.2")
	tr.link("bus/pci/devices/0000:17:00.0", "../../../"+pf)
	tr.link("bus/pci/devices/0000:17:00.2", "../../../"+vf)
	return tr, Class{Sysfs: tr.root}
}

func TestDevicesAndIdentity(t *testing.T) {
	_, c := newTree(t)
	devs, err := c.Devices()
	if err != nil || !slices.Equal(devs, []string{"mlx5_0", "mlx5_2", "rxe0"}) {
		t.Fatalf("Devices() = %v, %v", devs, err)
	}
	for dev, want := range map[string]Identity{
		"mlx5_0": {PCIAddr: "0000:17:00.0", SRIOV: true},
		"mlx5_2": {PCIAddr: "0000:17:00.2", IsVF: true, PFDevice: "mlx5_0"},
		"rxe0":   {},
		"gone":   {}, // removed since the listing
	} {
		if got := c.Identify(dev); got != want {
			t.Errorf("Identify(%s) = %+v, want %+v", dev, got, want)
		}
	}
}

// TestDanglingDeviceLink: a device link whose target is gone gives no PCI
// address (an empty label, as for a virtual device), not the dead target's
// basename.
func TestDanglingDeviceLink(t *testing.T) {
	tr, c := newTree(t)
	tr.dir("devices/virtual/infiniband/odd0/ports/1")
	tr.link("class/infiniband/odd0", "../../devices/virtual/infiniband/odd0")
	tr.link("devices/virtual/infiniband/odd0/device", "../../../pci0000:99/0000:99:00.0")
	if got := c.Identify("odd0"); got != (Identity{}) {
		t.Errorf("Identify(odd0) = %+v, want the zero Identity", got)
	}
}

func TestNoClassIsNoDevices(t *testing.T) {
	devs, err := Class{Sysfs: t.TempDir()}.Devices()
	if err != nil || devs != nil {
		t.Errorf("Devices() = %v, %v; want none, no error", devs, err)
	}
	// A class path that exists but is not a directory is an error.
	tr := tree{t, t.TempDir()}
	tr.file("class", "not a directory\n")
	if _, err := (Class{Sysfs: tr.root}).Devices(); err == nil {
		t.Error("unreadable class directory reported as no devices")
	}
}

func TestPortsNumericOrder(t *testing.T) {
	tr, c := newTree(t)
	base := "devices/virtual/infiniband/rxe0/ports/"
	for _, n := range []string{"2", "10", "11", "0", "+3", "04", "-1", "x"} {
		tr.dir(base + n)
	}
	ports, err := c.Ports("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, p := range ports {
		nums = append(nums, p.Num)
		if p.Device != "rxe0" || p.Dir != filepath.Join(c.DeviceDir("rxe0"), "ports", fmt.Sprint(p.Num)) {
			t.Errorf("port %+v", p)
		}
	}
	if !slices.Equal(nums, []int{0, 1, 2, 10, 11}) {
		t.Errorf("ports %v, want 0 1 2 10 11 (numeric; non-canonical names skipped)", nums)
	}
	if ports, err := c.Ports("gone"); err != nil || ports != nil {
		t.Errorf("device without ports: %v, %v", ports, err)
	}
}

// The port's own netdev is the lowest populated GID entry in numeric
// order, not the first in the directory listing (where 10 sorts before 2).
func TestNetDevLowestPopulatedIndex(t *testing.T) {
	tr, c := newTree(t)
	ndevs := "devices/virtual/infiniband/rxe0/ports/1/gid_attrs/ndevs/"
	for i := range 12 {
		if i != 1 {
			tr.file(ndevs+fmt.Sprint(i), "") // unpopulated (EINVAL on a live system)
		}
	}
	tr.dir(ndevs + "1")               // a read error (EISDIR): skipped
	tr.file(ndevs+"10", "eno1.100\n") // a VLAN upper device's GID
	tr.file(ndevs+"2", "eno1\n")
	ports, err := c.Ports("rxe0")
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %v, %v", ports, err)
	}
	if got := ports[0].NetDev(); got != "eno1" {
		t.Errorf("NetDev() = %q, want eno1 (index 2 before index 10)", got)
	}
	tr.file(ndevs+"2", "")
	if got := ports[0].NetDev(); got != "eno1.100" {
		t.Errorf("NetDev() = %q, want eno1.100", got)
	}
	// An InfiniBand port has no populated entry.
	ib, _ := c.Ports("mlx5_0")
	if got := ib[0].NetDev(); got != "" {
		t.Errorf("IB port NetDev() = %q", got)
	}
}

func TestLinkLayer(t *testing.T) {
	tr, c := newTree(t)
	tr.file("devices/virtual/infiniband/rxe0/ports/1/link_layer", "Ethernet\n")
	ports, _ := c.Ports("rxe0")
	if got := ports[0].LinkLayer(); got != "Ethernet" {
		t.Errorf("LinkLayer() = %q", got)
	}
	ib, _ := c.Ports("mlx5_0")
	if got := ib[0].LinkLayer(); got != "" {
		t.Errorf("missing link_layer = %q", got)
	}
}

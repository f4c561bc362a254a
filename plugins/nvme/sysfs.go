package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/plexporter/plexporter/internal/sysfs"
)

// identity is what sysfs tells about a controller without any privilege.
type identity struct {
	Device      string // nvme0
	Serial      string
	Model       string
	FirmwareRev string
	Transport   string // pcie, tcp, rdma, fc, loop
	State       string // live, resetting, connecting, deleting, dead, ...
	Address     string // PCI function or fabrics address
	// Errs holds the attributes that could not be read (left empty).
	Errs []error
}

// listControllers returns the controller names under <root>/class/nvme
// (root is the sysfs mount) in numeric order (nvme2 before nvme10). Only
// nvme<N> entries are controllers: namespaces and generic char devices
// (nvme0n1, ng0n1) live elsewhere but are filtered out defensively. A
// missing class directory (no NVMe driver loaded) is no controllers.
func listControllers(root string) ([]string, error) {
	entries, err := sysfs.Numbered(filepath.Join(root, "class", "nvme"), "nvme")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names, nil
}

// readIdentity reads the identity attributes of one controller under the
// sysfs mount root with sysfs.ReadAttr, which trims the space padding the
// kernel gives serial/model/firmware_rev and makes every value valid UTF-8.
// Attributes that are missing or unreadable are left empty and their errors
// listed in Errs; only an unreadable controller directory, or one without
// any readable attribute, is an error.
func readIdentity(root, ctrl string) (identity, error) {
	dir := filepath.Join(root, "class", "nvme", ctrl)
	id := identity{Device: ctrl}
	if _, err := os.Stat(dir); err != nil {
		return id, err
	}
	for _, a := range []struct {
		name string
		dst  *string
	}{
		{"serial", &id.Serial},
		{"model", &id.Model},
		{"firmware_rev", &id.FirmwareRev},
		{"transport", &id.Transport},
		{"state", &id.State},
		{"address", &id.Address},
	} {
		v, err := sysfs.ReadAttr(filepath.Join(dir, a.name))
		if err != nil {
			id.Errs = append(id.Errs, err)
			continue
		}
		*a.dst = v
	}
	if len(id.Errs) == 6 {
		// The first cause says why (permission denied: a sandbox without the
		// devices grant), which "none readable" alone would not.
		return id, fmt.Errorf("%s: no identity attribute readable: %w", dir, id.Errs[0])
	}
	return id, nil
}

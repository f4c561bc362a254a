package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/plexporter/plexporter/plugins/internal/sysfs"
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
	Cntlid      string // controller ID within its subsystem
	// Errs holds the attributes that exist but could not be read (left
	// empty). An attribute the kernel does not have (transport and address
	// before Linux 4.x, cntlid on old kernels) is empty without an error:
	// it would otherwise be a collect error on every scrape.
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
const identityAttrs = 7

func readIdentity(root, ctrl string) (identity, error) {
	dir := filepath.Join(root, "class", "nvme", ctrl)
	id := identity{Device: ctrl}
	missing := 0
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
		{"cntlid", &id.Cntlid},
	} {
		v, err := sysfs.ReadAttr(filepath.Join(dir, a.name))
		if errors.Is(err, fs.ErrNotExist) {
			missing++
			continue
		}
		if err != nil {
			id.Errs = append(id.Errs, err)
			continue
		}
		*a.dst = v
	}
	switch {
	case missing == identityAttrs:
		return id, fmt.Errorf("%s: no identity attribute (serial, model, ...) exists", dir)
	case missing+len(id.Errs) == identityAttrs:
		// The first cause says why (permission denied: a sandbox without the
		// devices grant), which "none readable" alone would not.
		return id, fmt.Errorf("%s: no identity attribute readable: %w", dir, id.Errs[0])
	}
	return id, nil
}

// namespace is one namespace block device of a controller, as sysfs shows
// it under the controller's directory: nvme0n1, or with native multipath
// the controller's path device nvme0c0n1.
type namespace struct {
	Name string // nvme0n1
	NSID string // nsid attribute, else from the name (see nsidFromName)
	// ANAState is the ANA state of a multipath path (optimized,
	// non-optimized, inaccessible, ...); empty without ANA.
	ANAState string
	// SizeBytes is the size attribute (512-byte sectors, whatever the
	// logical block size) in bytes.
	SizeBytes    uint64
	HasSize      bool
	BlockSize    uint64 // queue/logical_block_size
	HasBlockSize bool
	UsedBytes    uint64 // nuse (logical blocks) x logical block size
	HasUsed      bool
}

var namespaceDir = regexp.MustCompile(`^nvme[0-9]+(c[0-9]+)?n([0-9]+)$`)

// nsidFromName is the namespace number of a namespace block device's name,
// nvme<subsystem>n<N> or nvme<subsystem>c<controller>n<N>: N. It stands in
// for the nsid attribute where the kernel has none, as node_exporter
// (procfs' NVMeClass) always takes it. The early drivers, which had no
// such attribute, named the disk nvme<controller>n<nsid>; later kernels
// number it with an instance counter of their own, which can differ from
// the NSID (a namespace 5 alone is nvme0n1), but they have the attribute,
// which is read first.
func nsidFromName(name string) string {
	if m := namespaceDir.FindStringSubmatch(name); m != nil {
		return m[2]
	}
	return ""
}

// readNamespaces reads the namespaces under a controller's directory. A
// missing attribute gives no value (never 0); a value that does not parse
// is an error.
//
// Units: the size attribute of every block device counts 512-byte
// sectors (block/genhd.c), while nuse is the NVMe Identify Namespace NUSE
// field, in logical blocks (drivers/nvme/host/sysfs.c). So size is x512
// and nuse x logical_block_size; multiplying size by the logical block
// size, as some exporters do, overstates a 4 KiB-formatted namespace 8x.
func readNamespaces(root, ctrl string) ([]namespace, []error) {
	dir := filepath.Join(root, "class", "nvme", ctrl)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{err}
	}
	var out []namespace
	var errs []error
	for _, e := range entries {
		if !namespaceDir.MatchString(e.Name()) {
			continue
		}
		nsDir := filepath.Join(dir, e.Name())
		ns := namespace{Name: e.Name()}
		str := func(f string) string {
			v, err := sysfs.ReadAttr(filepath.Join(nsDir, f))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return v
		}
		num := func(f string) (uint64, bool) {
			v := str(f)
			if v == "" {
				return 0, false
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(nsDir, f), err))
				return 0, false
			}
			return n, true
		}
		ns.NSID, ns.ANAState = str("nsid"), str("ana_state")
		if ns.NSID == "" {
			ns.NSID = nsidFromName(e.Name())
		}
		if sectors, ok := num("size"); ok {
			ns.SizeBytes, ns.HasSize = sectors*512, true
		}
		ns.BlockSize, ns.HasBlockSize = num("queue/logical_block_size")
		if nuse, ok := num("nuse"); ok && ns.HasBlockSize {
			ns.UsedBytes, ns.HasUsed = nuse*ns.BlockSize, true
		}
		out = append(out, ns)
	}
	return out, errs
}

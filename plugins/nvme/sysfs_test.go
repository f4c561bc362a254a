package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListControllers(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	// Entries that are not controllers are ignored.
	must(t, os.Symlink("nvme0", filepath.Join(root, "class/nvme/nvme0n1")))
	must(t, os.Symlink("nvme0", filepath.Join(root, "class/nvme/nvme10")))
	got, err := listControllers(root)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "nvme0,nvme1,nvme2,nvme10" {
		t.Fatalf("controllers = %v", got)
	}
	if got, err := listControllers(t.TempDir()); err != nil || got != nil {
		t.Fatalf("no class/nvme: %v %v", got, err)
	}
	// class/nvme is a file: an error, not "no controllers".
	bad := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(bad, "class"), 0o755))
	must(t, os.WriteFile(filepath.Join(bad, "class/nvme"), nil, 0o644))
	if _, err := listControllers(bad); err == nil {
		t.Fatal("class/nvme as a file accepted")
	}
}

func TestReadIdentityPadded(t *testing.T) {
	// Real capture: serial/model/firmware_rev padded with spaces.
	root := sysfsFixture(t, "sysfs-qemu")
	id, err := readIdentity(root, "nvme0")
	if err != nil || len(id.Errs) != 0 {
		t.Fatal(err, id.Errs)
	}
	want := identity{Device: "nvme0", Serial: "LAB123", Model: "QEMU NVMe Ctrl", FirmwareRev: "7.2.22", Transport: "pcie", State: "live", Address: "0000:00:05.0"}
	if id.Device != want.Device || id.Serial != want.Serial || id.Model != want.Model || id.FirmwareRev != want.FirmwareRev ||
		id.Transport != want.Transport || id.State != want.State || id.Address != want.Address {
		t.Fatalf("identity = %+v", id)
	}
}

func TestReadIdentityPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads mode-000 files; the unreadable-attribute path is covered by TestIdentityErrorsArePartial")
	}
	root := sysfsFixture(t, "sysfs")
	must(t, os.Chmod(filepath.Join(root, "class/nvme/nvme0/serial"), 0))
	id, err := readIdentity(root, "nvme0")
	if err != nil || len(id.Errs) != 1 || !isPermission(id.Errs[0]) || id.Serial != "" || id.Model == "" {
		t.Fatalf("identity %+v err %v", id, err)
	}
}

// A controller none of whose attributes can be read is an error that says
// why (the first attribute's error), not only that none was readable.
func TestReadIdentityNothingReadableSaysWhy(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	dir := filepath.Join(root, "class/nvme/nvme0")
	for _, a := range []string{"serial", "model", "firmware_rev", "transport", "state", "address", "cntlid"} {
		p := filepath.Join(dir, a)
		if os.Geteuid() == 0 {
			// root reads mode-000 files: a directory fails the read instead.
			must(t, os.Remove(p))
			must(t, os.Mkdir(p, 0o755))
		} else {
			must(t, os.Chmod(p, 0))
		}
	}
	_, err := readIdentity(root, "nvme0")
	if err == nil || !strings.Contains(err.Error(), "no identity attribute readable: ") || !strings.Contains(err.Error(), filepath.Join(dir, "serial")) {
		t.Fatalf("err = %v, want the first attribute's error wrapped", err)
	}
}

// TestAttributesOldKernelsLack: an attribute the kernel does not have
// (transport, address and cntlid are missing on old kernels) is an empty
// label, not a collect error on every scrape; one that exists but cannot be
// read still is.
func TestAttributesOldKernelsLack(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	dir := filepath.Join(root, "class/nvme/nvme0")
	for _, a := range []string{"transport", "address", "cntlid"} {
		must(t, os.Remove(filepath.Join(dir, a)))
	}
	id, err := readIdentity(root, "nvme0")
	if err != nil || len(id.Errs) != 0 {
		t.Fatalf("missing attributes reported: %v %v", err, id.Errs)
	}
	if id.Transport != "" || id.Address != "" || id.Cntlid != "" || id.Serial == "" {
		t.Fatalf("identity = %+v", id)
	}
	for _, a := range []string{"serial", "model", "firmware_rev", "state"} {
		must(t, os.Remove(filepath.Join(dir, a)))
	}
	if _, err := readIdentity(root, "nvme0"); err == nil || !strings.Contains(err.Error(), "no identity attribute") {
		t.Fatalf("a controller directory without any attribute: err = %v", err)
	}
}

// TestNamespaceUnits: size counts 512-byte sectors whatever the logical
// block size, nuse logical blocks; an attribute that is missing gives no
// value.
func TestNamespaceUnits(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	nss, errs := readNamespaces(root, "nvme0")
	if len(errs) != 0 || len(nss) != 1 {
		t.Fatalf("namespaces %+v errors %v", nss, errs)
	}
	ns := nss[0]
	if ns.Name != "nvme0n1" || ns.NSID != "1" || !ns.HasSize || ns.SizeBytes != 7501476528*512 || ns.BlockSize != 4096 || !ns.HasUsed || ns.UsedBytes != 187536913*4096 {
		t.Fatalf("nvme0n1 = %+v", ns)
	}
	// nvme1n1 has no nuse file: no used bytes, and no error.
	nss, errs = readNamespaces(root, "nvme1")
	if len(errs) != 0 || len(nss) != 1 || nss[0].HasUsed || !nss[0].HasSize || nss[0].SizeBytes != 3750748848*512 {
		t.Fatalf("nvme1 namespaces %+v errors %v", nss, errs)
	}
	// A value that is not a number is an error naming the file.
	must(t, os.WriteFile(filepath.Join(root, "class/nvme/nvme0/nvme0n1/size"), []byte("lots\n"), 0o644))
	nss, errs = readNamespaces(root, "nvme0")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "nvme0n1/size") || nss[0].HasSize {
		t.Fatalf("garbage size: %+v %v", nss, errs)
	}
}

// TestNamespaceIDWithoutAttribute: where the namespace has no nsid
// attribute, the nsid is the number after the last "n" of the block
// device's name, as node_exporter takes it (never an empty label); where
// the attribute exists it wins over the name.
func TestNamespaceIDWithoutAttribute(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	ctrl := filepath.Join(root, "class/nvme/nvme0")
	must(t, os.Remove(filepath.Join(ctrl, "nvme0n1/nsid")))
	// A native-multipath path device of namespace 12, without nsid.
	must(t, os.MkdirAll(filepath.Join(ctrl, "nvme0c0n12"), 0o755))
	must(t, os.WriteFile(filepath.Join(ctrl, "nvme0c0n12/size"), []byte("2048\n"), 0o644))
	nss, errs := readNamespaces(root, "nvme0")
	if len(errs) != 0 || len(nss) != 2 {
		t.Fatalf("namespaces %+v errors %v", nss, errs)
	}
	got := map[string]string{}
	for _, ns := range nss {
		got[ns.Name] = ns.NSID
	}
	if got["nvme0n1"] != "1" || got["nvme0c0n12"] != "12" {
		t.Errorf("nsid by namespace %v, want nvme0n1: 1, nvme0c0n12: 12 (from the names)", got)
	}
	// The attribute, where the kernel has it, is the namespace's NSID even
	// where the name's number is not (newer kernels number block devices
	// with an instance counter).
	must(t, os.WriteFile(filepath.Join(root, "class/nvme/nvme1/nvme1n1/nsid"), []byte("7\n"), 0o644))
	nss, errs = readNamespaces(root, "nvme1")
	if len(errs) != 0 || len(nss) != 1 || nss[0].NSID != "7" {
		t.Errorf("nvme1 namespaces %+v errors %v, want nsid 7 from the attribute", nss, errs)
	}
}

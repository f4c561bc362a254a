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
	for _, a := range []string{"serial", "model", "firmware_rev", "transport", "state", "address"} {
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

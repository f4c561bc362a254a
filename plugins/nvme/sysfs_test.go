package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestListControllers(t *testing.T) {
	root := filepath.Join(sdktest.UnpackTar(t, "testdata/sysfs.tar"), "sysfs")
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
	root := filepath.Join(sdktest.UnpackTar(t, "testdata/sysfs-qemu.tar"), "sysfs")
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
	root := filepath.Join(sdktest.UnpackTar(t, "testdata/sysfs.tar"), "sysfs")
	must(t, os.Chmod(filepath.Join(root, "class/nvme/nvme0/serial"), 0))
	id, err := readIdentity(root, "nvme0")
	if err != nil || len(id.Errs) != 1 || !isPermission(id.Errs[0]) || id.Serial != "" || id.Model == "" {
		t.Fatalf("identity %+v err %v", id, err)
	}
}

func TestReadAttrTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "model")
	must(t, os.WriteFile(p, []byte(strings.Repeat("x", 5000)), 0o644))
	if _, err := readAttr(p); err == nil {
		t.Fatal("5000-byte attribute accepted")
	}
}

func TestCleanAttr(t *testing.T) {
	for in, want := range map[string]string{
		"LAB123              \n":                     "LAB123",
		"QEMU NVMe Ctrl                          \n": "QEMU NVMe Ctrl",
		"S64FNE0T712345\n":                           "S64FNE0T712345",
		"\x00\x00 abc\x00\n":                         "abc",
		"a\xffb":                                     "a\uFFFDb",
		"":                                           "",
	} {
		if got := cleanAttr([]byte(in)); got != want {
			t.Errorf("cleanAttr(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCleanAttr(f *testing.F) {
	for _, s := range []string{"LAB123              \n", "7.2.22  \n", "traddr=192.0.2.10,trsvcid=4420\n", "\xff\x00 x \t", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := cleanAttr(b)
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 label value %q", s)
		}
		if s == "" {
			return
		}
		first, _ := utf8.DecodeRuneInString(s)
		last, _ := utf8.DecodeLastRuneInString(s)
		for _, r := range []rune{first, last} {
			if r == 0 || unicode.IsSpace(r) {
				t.Fatalf("untrimmed %q", s)
			}
		}
	})
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Creating an archive and extracting it gives the tree back; the archive
// starts with the header comment ttar writes.
func TestCreateExtract(t *testing.T) {
	src := t.TempDir()
	dev := filepath.Join(src, "sys", "devices", "pci0000:00", "0000:00:01.0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dev, "vendor"), []byte("0x15b3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "sysfs.ttar")
	if err := run(true, false, archive, src, []string{"sys"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(archive)
	if err != nil || !strings.HasPrefix(string(b), "# Archive created by ttar -c -f sysfs.ttar sys\nDirectory: sys\n") {
		t.Fatalf("archive %q, %v", b, err)
	}
	dst := filepath.Join(t.TempDir(), "new")
	if err := run(false, true, archive, dst, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "sys", "devices", "pci0000:00", "0000:00:01.0", "vendor")); err != nil || string(got) != "0x15b3\n" {
		t.Errorf("extracted vendor = %q, %v", got, err)
	}
}

func TestUsageErrors(t *testing.T) {
	for name, err := range map[string]error{
		"neither -c nor -x": run(false, false, "a.ttar", ".", nil),
		"both":              run(true, true, "a.ttar", ".", nil),
		"no archive":        run(true, false, "", ".", []string{"sys"}),
		"-c without paths":  run(true, false, filepath.Join(t.TempDir(), "a.ttar"), ".", nil),
		"-x with paths":     run(false, true, "a.ttar", t.TempDir(), []string{"sys"}),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

package sysfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"mlx5_1", "ionic_0", "mlx5_0"} {
		write(t, dir, n, "")
	}
	got, err := Names(dir)
	if err != nil || !slices.Equal(got, []string{"ionic_0", "mlx5_0", "mlx5_1"}) {
		t.Errorf("Names = %v, %v; want name order", got, err)
	}
	if got, err := Names(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("missing directory: %v, %v; want none, no error", got, err)
	}
	if _, err := Names(filepath.Join(dir, "mlx5_0")); err == nil {
		t.Error("a file listed as a directory")
	}
}

func TestNumbered(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"nvme10", "nvme2", "nvme0", "nvme0n1", "ng0n1", "nvme", "nvme+3", "nvme04", "nvme-1", "7", "x"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Numbered(dir, "nvme")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{{"nvme0", 0}, {"nvme2", 2}, {"nvme10", 10}}; !slices.Equal(got, want) {
		t.Errorf("Numbered(nvme) = %v, want %v (numeric order; non-canonical numbers skipped)", got, want)
	}
	if got, err := Numbered(dir, ""); err != nil || !slices.Equal(got, []Entry{{"7", 7}}) {
		t.Errorf("Numbered(\"\") = %v, %v; want only 7", got, err)
	}
	if got, err := Numbered(filepath.Join(dir, "missing"), ""); err != nil || got != nil {
		t.Errorf("missing directory: %v, %v; want none, no error", got, err)
	}
	f := write(t, dir, "file", "")
	if _, err := Numbered(f, ""); err == nil {
		t.Error("a file listed as a directory")
	}
}

package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func refresh(t *testing.T, d *Dir, buf *Buffer) {
	t.Helper()
	if err := d.Refresh(buf); err != nil {
		t.Fatal(err)
	}
}

// What a held directory shows follows the directory between refreshes:
// new names, removed names, a name replaced by another file, a file
// rewritten in place, a subdirectory removed and made again.
func TestDirFollowsTheDirectory(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", "1\n")
	write(t, root, "b", "2\n")
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "sub"), "x", "7\n")
	fds := NewFDBudgetOf(100)
	d, err := OpenDir(root, fds)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	refresh(t, d, &buf)
	if want := []string{"a", "b", "sub"}; !slices.Equal(d.Names(), want) {
		t.Fatalf("Names = %v, want %v", d.Names(), want)
	}
	counter := func(name string) uint64 {
		t.Helper()
		v, err := d.ReadCounter(name, &buf)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if counter("a") != 1 || counter("b") != 2 {
		t.Fatal("first read")
	}
	// Rewritten in place (same inode, as sysfs regenerates it): the held
	// descriptor reads the new value.
	write(t, root, "a", "11\n")
	if v := counter("a"); v != 11 {
		t.Errorf("rewritten file reads %d, want 11", v)
	}
	// Replaced (rename over it: another inode), removed, added.
	tmp := write(t, t.TempDir(), "new", "22\n")
	if err := os.Rename(tmp, filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	write(t, root, "c", "3\n")
	refresh(t, d, &buf)
	if want := []string{"b", "c", "sub"}; !slices.Equal(d.Names(), want) {
		t.Errorf("after changes: Names = %v, want %v", d.Names(), want)
	}
	if v := counter("b"); v != 22 {
		t.Errorf("replaced file reads %d, want the new file's 22", v)
	}
	if v := counter("c"); v != 3 {
		t.Errorf("new file reads %d", v)
	}
	if _, err := d.Read("a", &buf); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(root, "a")) {
		t.Errorf("removed file: %v, want ErrNotExist naming it", err)
	}
	// A subdirectory removed and made again is reopened.
	sub, err := d.Sub("sub")
	if err != nil {
		t.Fatal(err)
	}
	refresh(t, sub, &buf)
	if v, err := sub.ReadCounter("x", &buf); err != nil || v != 7 {
		t.Fatalf("sub/x = %d, %v", v, err)
	}
	if err := os.RemoveAll(filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "sub"), "x", "8\n")
	refresh(t, d, &buf)
	sub, err = d.Sub("sub")
	if err != nil {
		t.Fatal(err)
	}
	refresh(t, sub, &buf)
	if v, err := sub.ReadCounter("x", &buf); err != nil || v != 8 {
		t.Errorf("recreated sub/x = %d, %v; want 8", v, err)
	}
	if _, err := d.Sub("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing subdirectory: %v", err)
	}
}

// Files beyond the budget are still read, each opened and closed again;
// Close gives every held descriptor back.
func TestDirBudget(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		write(t, root, n, "5\n")
	}
	fds := NewFDBudgetOf(3) // the directory and two files
	d, err := OpenDir(root, fds)
	if err != nil {
		t.Fatal(err)
	}
	var buf Buffer
	for range 2 {
		refresh(t, d, &buf)
		for _, n := range d.Names() {
			if v, err := d.ReadCounter(n, &buf); err != nil || v != 5 {
				t.Errorf("%s = %d, %v", n, v, err)
			}
		}
	}
	if runtime.GOOS == "linux" && fds.Held() != 3 {
		t.Errorf("%d descriptors held, want the budget's 3", fds.Held())
	}
	d.Close()
	if fds.Held() != 0 {
		t.Errorf("%d descriptors held after Close", fds.Held())
	}
}

// The refusals of a path-based read hold for a held read too.
func TestDirReadRefuses(t *testing.T) {
	root := t.TempDir()
	write(t, root, "big", strings.Repeat("1", MaxAttrSize+1))
	write(t, root, "page", strings.Repeat("1", MaxAttrSize))
	write(t, root, "bad", "hello\n")
	if err := os.Mkdir(filepath.Join(root, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root, NewFDBudgetOf(10))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	refresh(t, d, &buf)
	for _, n := range []string{"big", "adir", "bad"} {
		if _, err := d.ReadCounter(n, &buf); err == nil || !strings.Contains(err.Error(), filepath.Join(root, n)) {
			t.Errorf("%s: err = %v, want an error naming it", n, err)
		}
	}
	if b, err := d.Read("page", &buf); err != nil || len(b) != MaxAttrSize {
		t.Errorf("a page-sized attribute: %d bytes, %v", len(b), err)
	}
}

// A held counter read makes no allocation: no path, no descriptor.
func TestDirReadDoesNotAllocate(t *testing.T) {
	root := t.TempDir()
	write(t, root, "c", "123456\n")
	d, err := OpenDir(root, NewFDBudgetOf(10))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	refresh(t, d, &buf)
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.Refresh(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ReadCounter("c", &buf); err != nil {
			t.Fatal(err)
		}
	})
	if runtime.GOOS == "linux" && allocs > 0 {
		t.Errorf("%.0f allocations per refresh and read", allocs)
	}
}

func BenchmarkDirReadCounter(b *testing.B) {
	root := b.TempDir()
	write(b, root, "c", "3410229118\n")
	d, err := OpenDir(root, NewFDBudgetOf(10))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	if err := d.Refresh(&buf); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := d.ReadCounter("c", &buf); err != nil {
			b.Fatal(err)
		}
	}
}

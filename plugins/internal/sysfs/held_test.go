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
	"time"
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

// RefreshIfChanged lists a directory again exactly when its stat changed:
// an unchanged directory costs no listing, and every change to its names
// (a file added, removed or renamed over, a subdirectory added or removed)
// is seen by the next call. racyWindow is 0 here, so only the stamp
// decides (the tree was just made: every stamp would be racy otherwise).
func TestRefreshIfChanged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("without a held descriptor every refresh lists")
	}
	defer func(w time.Duration) { racyWindow = w }(racyWindow)
	racyWindow = 0
	root := t.TempDir()
	write(t, root, "a", "1\n")
	d, err := OpenDir(root, NewFDBudgetOf(100))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	step := func(what string, wantListed bool, want ...string) {
		t.Helper()
		before := d.Listings()
		if err := d.RefreshIfChanged(&buf); err != nil {
			t.Fatal(err)
		}
		if listed := d.Listings() != before; listed != wantListed {
			t.Errorf("%s: listed %v, want %v", what, listed, wantListed)
		}
		if !slices.Equal(d.Names(), want) {
			t.Errorf("%s: Names = %v, want %v", what, d.Names(), want)
		}
		// The next change gets a later timestamp even on a kernel without
		// fine-grained timestamps on stat (before 6.13), whose clock ticks
		// at HZ (100 at least).
		time.Sleep(20 * time.Millisecond)
	}
	step("first", true, "a")
	step("unchanged", false, "a")
	write(t, root, "a", "2\n") // rewritten in place: the names are the same
	step("a file rewritten", false, "a")
	if v, err := d.ReadCounter("a", &buf); err != nil || v != 2 {
		t.Errorf("rewritten a = %d, %v; want 2", v, err)
	}
	write(t, root, "b", "3\n")
	step("a file added", true, "a", "b")
	if err := os.Remove(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	step("a file removed", true, "b")
	tmp := write(t, t.TempDir(), "new", "4\n")
	if err := os.Rename(tmp, filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	step("a file renamed over", true, "b")
	if v, err := d.ReadCounter("b", &buf); err != nil || v != 4 {
		t.Errorf("b after the rename = %d, %v; want the new file's 4", v, err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	step("a subdirectory added", true, "b", "sub")
	if err := os.Remove(filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	step("a subdirectory removed", true, "b")
	step("unchanged again", false, "b")
}

// A stamp made within racyWindow of a change is not trusted: a change in
// the same timestamp tick would leave it as it was, so the next call lists
// again; once the window has passed, it is trusted.
func TestRefreshIfChangedRacyStamp(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("without a held descriptor every refresh lists")
	}
	defer func(w time.Duration) { racyWindow = w }(racyWindow)
	racyWindow = time.Hour // every stamp of a tree made now is racy
	root := t.TempDir()
	write(t, root, "a", "1\n")
	d, err := OpenDir(root, NewFDBudgetOf(100))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	for i := range 3 {
		if err := d.RefreshIfChanged(&buf); err != nil {
			t.Fatal(err)
		}
		if d.Listings() != uint64(i+1) {
			t.Fatalf("call %d: %d listings; a racy stamp must be listed again every time", i+1, d.Listings())
		}
	}
	racyWindow = 0
	refreshIfChanged := func() {
		t.Helper()
		if err := d.RefreshIfChanged(&buf); err != nil {
			t.Fatal(err)
		}
	}
	refreshIfChanged() // lists (the last stamp was racy) and trusts the new one
	n := d.Listings()
	refreshIfChanged()
	if d.Listings() != n {
		t.Errorf("a trusted, unchanged stamp was listed again")
	}
}

// A listing that changes the names makes a new Names slice: one a caller
// kept from before still says what it said.
func TestDirNamesAreNeverModified(t *testing.T) {
	root := t.TempDir()
	write(t, root, "b", "1\n")
	write(t, root, "c", "1\n")
	d, err := OpenDir(root, NewFDBudgetOf(10))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var buf Buffer
	refresh(t, d, &buf)
	kept := d.Names()
	if err := os.Remove(filepath.Join(root, "c")); err != nil {
		t.Fatal(err)
	}
	write(t, root, "a", "1\n")
	refresh(t, d, &buf)
	if want := []string{"b", "c"}; !slices.Equal(kept, want) {
		t.Errorf("a kept listing changed to %v, want %v", kept, want)
	}
	if want := []string{"a", "b"}; !slices.Equal(d.Names(), want) || !d.Has("a") || d.Has("c") {
		t.Errorf("Names = %v, Has(a) %v, Has(c) %v; want %v", d.Names(), d.Has("a"), d.Has("c"), want)
	}
}

//go:build !linux

package sysfs

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Without Linux's openat, getdents and pread a Dir holds nothing: it lists
// and reads by path. (There is no sysfs here; this keeps fixture-driven
// tests and builds working.)

// OpenDir checks that path is a directory; it has no listing yet: call
// Refresh.
func OpenDir(path string, fds *FDBudget) (*Dir, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrInvalid}
	}
	return &Dir{path: path, fd: -1, fds: fds, entries: map[string]*entry{}}, nil
}

func (d *Dir) openSub(name string) (*Dir, error) {
	return OpenDir(filepath.Join(d.path, name), d.fds)
}

func (d *Dir) closeSelf() {}

func closeFD(int) {}

// RefreshIfChanged re-lists the directory: without a held descriptor
// there is nothing cheaper to ask.
func (d *Dir) RefreshIfChanged(buf *Buffer) error { return d.Refresh(buf) }

// Refresh re-lists the directory.
func (d *Dir) Refresh(*Buffer) error {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return err
	}
	d.gen++
	d.listings++
	changed := false
	for _, e := range ents {
		if d.see([]byte(e.Name()), 0, 0) {
			changed = true
		}
	}
	d.sweep(changed)
	return nil
}

// Read reads the attribute name of the last listing by its path.
func (d *Dir) Read(name string, buf *Buffer) ([]byte, error) {
	if d.entries[name] == nil {
		return nil, d.notExist(name)
	}
	return buf.Read(filepath.Join(d.path, name))
}

func nofileLimit() uint64 { return 0 }

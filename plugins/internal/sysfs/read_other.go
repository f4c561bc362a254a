//go:build !unix

package sysfs

import (
	"fmt"
	"io"
	"os"
)

// Read reads the attribute at path into buf and returns the bytes read,
// which alias buf and are valid until its next use. Attributes larger than
// MaxAttrSize are errors; every error names the path. (There is no sysfs
// here; this keeps fixture-driven tests and builds working.)
func (buf *Buffer) Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf[:])
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return buf[:n], nil
	case nil:
		return nil, fmt.Errorf("%s: larger than %d bytes, not a sysfs attribute", path, MaxAttrSize)
	default:
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
}

//go:build !linux

package main

import "errors"

// errUnsupported: NIXL rings are mapped with Linux system calls; the
// plugin builds elsewhere so that its parsers and tests run on a laptop.
var errUnsupported = errors.New("reading NIXL rings needs Linux")

type ringFile struct {
	path     string
	id       fileID
	lay      slotLayout
	capacity uint64
}

type fileID struct{ dev, ino uint64 }

type drainResult struct {
	header header
	run    []byte
	moved  bool
}

var errReopen = errors.New("ring changed shape")

func openRing(path string) (*ringFile, error) {
	return nil, &formatError{reason: reasonOpen, msg: path + ": " + errUnsupported.Error()}
}

func (r *ringFile) close() {}

func (r *ringFile) drain(*[]byte) (drainResult, error) { return drainResult{}, errUnsupported }

func probeFile(path string) (fileSig, error) { return fileSig{}, errUnsupported }

func statID(path string) (fileID, error) { return fileID{}, errUnsupported }

func (r *ringFile) checkSize() error { return errUnsupported }

func (r *ringFile) openElsewhere() (bool, error) { return false, errUnsupported }

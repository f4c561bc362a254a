package main

import (
	"os"
	"syscall"
)

// inode identifies the kernfs node of a device directory: a device that is
// removed and re-added under the same name gets a new one.
func inode(fi os.FileInfo) uint64 {
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

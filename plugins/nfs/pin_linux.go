//go:build linux

package main

import (
	"golang.org/x/sys/unix"
)

// pinned holds O_PATH descriptors of the procfs files and directories the
// plugin reads on every scrape. The sandbox's Landlock rules name inodes,
// the ones these paths had when the sandbox was built, and procfs makes a
// new inode for /proc/<pid>/... whenever its dentry was reclaimed (memory
// pressure; drop_caches=2 in the real-kernel lab): every later open would be
// EACCES. An open descriptor keeps the dentry, and with it the inode the
// rule names. O_PATH needs no access right, so opening is allowed inside
// the sandbox, and a path that does not exist is simply not pinned (the
// scrape reports it).
type pinned []int

func pin(paths ...string) pinned {
	var fds pinned
	for _, p := range paths {
		if fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds
}

func (p pinned) release() {
	for _, fd := range p {
		unix.Close(fd)
	}
}

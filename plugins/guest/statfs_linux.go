package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// statfs reads a filesystem's usage with statfs(2). Block counts are in
// units of f_frsize (the fragment size); f_bsize is only the preferred I/O
// size, which differs on some filesystems (NFS reports the server's
// transfer size there).
func statfs(path string) (fsUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsUsage{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := uint64(st.Frsize)
	if bs == 0 {
		bs = uint64(st.Bsize)
	}
	return fsUsage{
		blocks: st.Blocks, free: st.Bfree, avail: st.Bavail, blockSize: bs,
		files: st.Files, filesFree: st.Ffree,
	}, nil
}

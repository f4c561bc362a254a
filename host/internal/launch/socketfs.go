package launch

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Each start's socket directory (go-plugin makes it in the host's runtime
// directory, /run/plexporter: RAM-backed and shared with systemd and every
// other service there) gets a small tmpfs of its own, mounted by the host in
// its own mount namespace before the plugin starts and unmounted when the
// process has exited. A plugin that fills its directory (blocks or inodes)
// then fills only that tmpfs: its own next write fails with ENOSPC, nobody
// else's. What a plugin needs there is its go-plugin socket (one inode, no
// blocks) and the directory itself; the rest of the bound is room for a
// temporary file.
const (
	SocketDirBytes  = 1 << 20 // size= of a socket directory's tmpfs
	SocketDirInodes = 64      // nr_inodes= (the directory itself is one)
)

// socketFSType is the mount's source, so that a later host recognises the
// mounts a host that died left behind (mountinfo) and removes only those.
const socketFSType = "tmpfs"
const socketFSSource = "plexporter-plugin"

// mountWarned makes the warning for a host that cannot bound the socket
// directories one line per host, not one per plugin start.
var mountWarned sync.Once

// boundSocketDir mounts the bounded tmpfs on dir, owned by uid:gid, mode
// 0700 (go-plugin's mode). It returns the unmount, to call once the
// plugin's process has exited, or nil when the host cannot mount (not root,
// no CAP_SYS_ADMIN, a read-only or locked mount namespace): then the
// directory stays on the runtime directory's file system, unbounded, and
// the host says so once.
func boundSocketDir(dir string, uid, gid int, log *slog.Logger) func() {
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", SocketDirBytes, SocketDirInodes, uid, gid)
	err := unix.Mount(socketFSSource, dir, socketFSType, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts)
	if err != nil {
		mountWarned.Do(func() {
			log.Warn("cannot mount a size-limited tmpfs on plugins' socket directories, so a plugin can fill the runtime directory's file system (blocks and inodes) for the host and everything else on it; run the host as root (CAP_SYS_ADMIN) in a mount namespace it may mount in",
				"dir", filepath.Dir(dir), "size_bytes", SocketDirBytes, "inodes", SocketDirInodes, "err", err)
		})
		return nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
				log.Warn("cannot unmount a plugin's socket directory", "dir", dir, "err", err)
			}
		})
	}
}

// unmountBelow detaches every socket-directory tmpfs mounted at or below
// dir (a host instance's directory), deepest first: what a host that died
// left mounted, before its directory is removed. Only mounts of
// socketFSSource are touched.
func unmountBelow(dir string, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		point := unescapeMountinfo(fields[4])
		if fields[sep+1] != socketFSType || fields[sep+2] != socketFSSource {
			continue
		}
		if point == dir || strings.HasPrefix(point, dir+"/") {
			points = append(points, point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			log.Warn("cannot unmount a socket directory left by a host that is gone", "dir", p, "err", err)
		}
	}
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

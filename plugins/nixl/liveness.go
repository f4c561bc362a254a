package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Liveness. A ring file carries no pid, heartbeat or start time, and NIXL
// never removes it, so whether its agent still runs must come from outside:
// a live agent keeps the file mapped shared, and with it open for writing,
// for the agent's whole life. The plugin calls an agent live while its
// write_pos moves. Once a ring has been idle for stale_after it asks the
// kernel, in this order:
//
//  1. a write lease on the plugin's own descriptor (ringFile.openElsewhere):
//     refused while any other open file description writes the file. It
//     needs the plugin to own the file (run as the application's user, the
//     manifest's recommended setting) and works inside the sandbox.
//  2. when the lease cannot answer (a plugin running as a group member, a
//     filesystem without leases): /proc/<pid>/maps of every process under
//     the host's procfs root, for the file's device and inode. The plugin
//     runs in its own PID namespace but reads the host's procfs (the
//     sandbox does not remount /proc), so every pid of the host is listed
//     there. Reading another process's maps is a ptrace access check:
//     same uid, and, in the sandbox, Landlock refuses it for processes
//     outside the plugin's domain. So this step works for an unsandboxed
//     plugin of the application's uid (or root) only; where it cannot see
//     the application, an idle ring counts as dead.
//
// A dead agent's series are dropped; its file is left alone, and read
// again as a new agent (counters from 0) once it changes.

// fileSig is what a file looked like when it was rejected or expired.
type fileSig struct {
	id     fileID
	size   int64
	header [headerSize]byte
}

// mappedFiles reports which of want are mapped by a process whose maps
// the plugin can read under procfs. denied counts the processes whose maps
// it could not read (other users' processes when not running as root):
// such a process may map a file without the plugin knowing. The plugin's
// own mappings do not count: it is found as procfs's "self", which names
// its pid as the host sees it (os.Getpid is the pid in the plugin's own
// namespace).
func mappedFiles(procfs string, want map[fileID]bool) (found map[fileID]bool, denied int) {
	found = map[fileID]bool{}
	self, _ := os.Readlink(filepath.Join(procfs, "self"))
	d, err := os.Open(procfs)
	if err != nil {
		return found, 1
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	byIno := map[uint64][]fileID{}
	for id := range want {
		byIno[id.ino] = append(byIno[id.ino], id)
	}
	buf := make([]byte, 64<<10)
	for _, name := range names {
		if _, err := strconv.ParseUint(name, 10, 32); err != nil || name == self {
			continue
		}
		f, err := os.Open(filepath.Join(procfs, name, "maps"))
		if err != nil {
			if os.IsPermission(err) {
				denied++
			}
			continue // the process exited
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(buf, 1<<20)
		for sc.Scan() {
			if id, ok := mapsFileID(sc.Bytes()); ok {
				for _, w := range byIno[id.ino] {
					if w.dev == id.dev {
						found[w] = true
					}
				}
			}
		}
		if sc.Err() != nil && os.IsPermission(sc.Err()) {
			denied++
		}
		f.Close()
	}
	return found, denied
}

// mapsFileID parses the device ("fd:01", hex major:minor) and inode of one
// /proc/<pid>/maps line; anonymous mappings (inode 0) are not files.
func mapsFileID(line []byte) (fileID, bool) {
	// address perms offset dev inode [path]
	var field [5][]byte
	for i := range field {
		line = bytes.TrimLeft(line, " ")
		end := bytes.IndexByte(line, ' ')
		if end < 0 {
			end = len(line)
		}
		field[i], line = line[:end], line[end:]
	}
	ino, err := strconv.ParseUint(string(field[4]), 10, 64)
	if err != nil || ino == 0 {
		return fileID{}, false
	}
	major, minor, ok := bytes.Cut(field[3], []byte(":"))
	if !ok {
		return fileID{}, false
	}
	maj, err1 := strconv.ParseUint(string(major), 16, 32)
	mnr, err2 := strconv.ParseUint(string(minor), 16, 32)
	if err1 != nil || err2 != nil {
		return fileID{}, false
	}
	return fileID{dev: mkdev(uint32(maj), uint32(mnr)), ino: ino}, true
}

// mkdev encodes a device number as the kernel's stat does (glibc's
// gnu_dev_makedev; x/sys/unix.Mkdev is the same, but Linux-only).
func mkdev(major, minor uint32) uint64 {
	return uint64(major&0x00000fff)<<8 | uint64(major&0xfffff000)<<32 |
		uint64(minor&0x000000ff) | uint64(minor&0xffffff00)<<12
}

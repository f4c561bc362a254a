package sandbox

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Kernel state a plugin would otherwise share with the host and with every
// process on the machine (issue 28 item 4):
//
//   - SysV IPC (shared memory, semaphores, message queues) is per IPC
//     namespace. Every sandboxed launcher is started with CLONE_NEWIPC: a
//     plugin sees no other process's segments, and what it creates dies
//     with its namespace (with the plugin), not with the machine.
//   - Abstract unix sockets are per network namespace, and anything local
//     may connect to one a plugin binds (Landlock's abstract scope limits
//     only the plugin's own connects). A plugin whose manifest grants no
//     network and needs none of the host's network view gets CLONE_NEWNET:
//     a namespace with only a down loopback. Pathname unix sockets (go-plugin's)
//     are reached through the filesystem and work across network namespaces.
//   - Keys: see metadata.go.

// cloneFlags are the namespaces the host creates for the launcher of s.
func (s *Spec) cloneFlags() uintptr {
	flags := uintptr(syscall.CLONE_NEWIPC)
	if s.PIDNamespace {
		flags |= syscall.CLONE_NEWPID
	}
	if s.NetNamespace {
		flags |= syscall.CLONE_NEWNET
	}
	return flags
}

// ownNetNamespace reports whether a plugin with the network grant n and
// these path grants runs in a network namespace of its own. Not when the
// grant names anything (netlink answers for the namespace the socket is
// in: rdma and ethtool must see the host's devices; inet and unix grants
// are there to reach the host's services), nor when a path grant on
// procfs can show network state: procfs's net directories
// (/proc/net, /proc/<pid>/net, read by nfs) show the reader's network
// namespace. sysfs is not remounted, so /sys/class/net stays the host's
// either way. procfs is the host's --path.procfs root or /proc.
func ownNetNamespace(n manifest.Network, procfs string, grants ...[]string) bool {
	if len(n.Netlink) > 0 || len(n.Unix) > 0 || n.Inet != nil {
		return false
	}
	roots := []string{"/proc"}
	if procfs != "" {
		roots = append(roots, filepath.Clean(procfs))
	}
	for _, p := range slices.Concat(grants...) {
		p = filepath.Clean(p)
		for _, root := range roots {
			rel, ok := strings.CutPrefix(p, root)
			if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
				continue
			}
			parts := strings.Split(strings.Trim(rel, "/"), "/")
			// procfs itself, or a directory right below it (self, <pid>,
			// thread-self, net): each holds a net directory.
			if len(parts) <= 1 || slices.Contains(parts, "net") {
				return false
			}
		}
	}
	return true
}

// canCreateNamespaces asks the kernel (capabilities, seccomp, systemd's
// RestrictNamespaces=) whether this host may create every namespace a
// launcher may need, without starting a process: unshare(2) on a locked
// thread that is never unlocked and ends with its goroutine. (The Go
// runtime starts no thread from a locked one.) CLONE_NEWPID changes only
// the thread's future children; the IPC and network namespaces it joins
// end with it.
func canCreateNamespaces() error {
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		errc <- unix.Unshare(unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWNET)
	}()
	return <-errc
}

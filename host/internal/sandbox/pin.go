package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A Landlock rule names an inode: the one its path resolved to when the
// launcher built the ruleset. procfs keeps no inode cache: every lookup of a
// name whose dentry is not in the dcache makes a new inode, for
// /proc/<pid>/... (what /proc/self/... resolves to) as well as /proc/stat or
// /proc/pressure. Once the kernel reclaims those dentries (memory pressure;
// drop_caches=2), every later open of a granted procfs path walks to inodes
// no rule names, and the plugin gets EACCES until it restarts (test/lab,
// Findings 2). sysfs (kernfs) and disk filesystems find their inodes again,
// so only procfs is affected.
//
// An open descriptor holds its dentry, and the dentry its inode and every
// ancestor. So before building the ruleset the launcher opens every granted
// procfs path with O_PATH and without O_CLOEXEC: the plugin inherits the
// descriptors across exec (same process, same pid, so /proc/self is still
// the task they were resolved for) and the dentries live as long as it does.
// For a granted directory the directory itself is what the rule names and
// what is held; a file below it may get a new dentry and inode at every
// lookup, but Landlock checks a path by walking up its ancestors, and the
// held directory is one of them.
//
// The descriptors are the plugin's to see (ls /proc/self/fd): O_PATH, so
// they read nothing; every open through them (openat, /proc/self/fd/N) is a
// path walk that Landlock checks against the same rules. A plugin that
// closes them gets the bug back, nothing more.

// pinProcfs opens each of paths that exists and is on procfs with O_PATH
// and without O_CLOEXEC, following symlinks as the ruleset does
// (/proc/self → /proc/<pid>), and returns the descriptors, which stay open
// across exec on purpose. A missing path is skipped, as the ruleset skips
// it; one that cannot be opened for another reason is left to the ruleset,
// which fails on it and says why. The descriptors count against
// RLIMIT_NOFILE, which is set before; running out of them is an error
// naming the limit, because the plugin would otherwise fail at the first
// reclaim, long after start.
func pinProcfs(paths []string) ([]int, error) {
	var fds []int
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		fd, err := unix.Open(p, unix.O_PATH, 0)
		if errors.Is(err, unix.EMFILE) {
			closeAll(fds)
			return nil, fmt.Errorf("holding the granted procfs path %s open (so that its Landlock rule survives dentry reclaim) needs one descriptor per granted procfs path, and RLIMIT_NOFILE (the manifest's limits.nofile) is exhausted: raise limits.nofile", p)
		}
		if err != nil {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil || st.Type != unix.PROC_SUPER_MAGIC {
			unix.Close(fd)
			continue
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// netEntryWarnings names the grants that no Landlock rule can ever make
// readable: anything below a /proc/<pid>/net directory (what
// /proc/self/net/... and /proc/net/... resolve to). procfs looks those
// entries up anew on every path walk (they never revalidate, so that a
// setns(2) sees its new network namespace): each open meets a new inode,
// held or not, reclaimed or not (measured, docs/design.md). The directory
// itself is stable, and its rule covers everything below it.
func netEntryWarnings(grants []string) []string {
	var out []string
	for _, g := range grants {
		for _, p := range expand(g) {
			var st unix.Statfs_t
			if unix.Statfs(p, &st) != nil || st.Type != unix.PROC_SUPER_MAGIC {
				continue
			}
			resolved, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue
			}
			if dir, ok := belowPIDNet(resolved); ok {
				out = append(out, fmt.Sprintf("the grant %s (%s) is below %s, whose entries get a new inode at every lookup, so its Landlock rule never matches and the plugin is denied: grant the directory (e.g. {procfs}/self/net)", g, resolved, dir))
			}
		}
	}
	return out
}

// belowPIDNet reports whether path lies strictly below a <pid>/net
// directory, and which.
func belowPIDNet(path string) (string, bool) {
	parts := strings.Split(path, "/")
	for i := 1; i+1 < len(parts); i++ {
		if parts[i] == "net" && isDigits(parts[i-1]) {
			return strings.Join(parts[:i+1], "/"), true
		}
	}
	return "", false
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A granted path is resolved by the root launcher at every start, and a
// Landlock rule is attached to whatever it resolves to. If resolving it
// follows a symlink that someone other than root or the host's user can
// change (own it, or write the directory holding it or one above), that
// someone chooses what the plugin may read or write, with the root
// launcher's reach: with the attribution plugin's CAP_DAC_OVERRIDE, a
// job-mapping link repointed to / handed it every root 0600 file.
//
// So the launcher opens every granted path itself, one component at a time
// (openat with O_PATH|O_NOFOLLOW from a descriptor of the directory before
// it), and grants the descriptor it ends with, never the path again:
//
//   - a symlink on the way (or the granted path itself being one) is
//     followed only if it is owned by root or the host's user and the
//     directory holding it and every directory above it are owned by root or
//     the host's user and not writable by group or others (a sticky
//     directory owned by root, like /tmp, counts as not writable: nobody can
//     replace what they do not own there) — host/internal/trust's rules for
//     the plugin binary; anything else refuses the plugin, naming the link
//     or directory, its owner and mode;
//   - a directory or file that is not a symlink is taken as it is, wherever
//     it is: who can rename entries in a directory can only move in what
//     they could move anyway, not root's files (sysfs's and procfs's links
//     are root's, in root's directories, so they keep working).
//
// The checks are made on the descriptors (fstat), the same inodes the walk
// then looks up names in, so nothing can be swapped between check and use.
// Resolve runs the same walk on the host, so that such a manifest is
// refused when the host reads it (named in the refusal); the launcher's
// walk holds it at every start, for a link changed since.

// GrantError says why a granted path is not granted.
type GrantError struct {
	Grant   string // the granted path (placeholders filled in)
	Kind    string // "symlink" or "directory"
	Path    string // the symlink or directory at fault
	Link    string // for a directory: the symlink below it that the walk met
	UID     uint32
	Mode    uint32
	Problem string
}

func (e *GrantError) Error() string {
	at := fmt.Sprintf("the symlink %s", e.Path)
	if e.Link != "" {
		at = fmt.Sprintf("the symlink %s, below the directory %s,", e.Link, e.Path)
	}
	return fmt.Sprintf("granted path %s: resolving it follows %s and the %s %s (owner %s, mode %04o): whoever can change that link chooses what the plugin may open, with the root launcher's reach; grant the link's target in the manifest instead, or make the link owned by root (chown -h root) and every directory down to it owned by root and not writable by group or others (chmod go-w)",
		e.Grant, at, e.Kind, e.Problem, ownerName(e.UID), e.Mode)
}

func ownerName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// maxGrantLinks bounds the symlinks followed resolving one grant, as the
// kernel's MAXSYMLINKS does.
const maxGrantLinks = 40

// walkDir is a directory the walk has opened: its descriptor, its path
// (for messages) and the first fault of it or a directory above it, if any.
type walkDir struct {
	fd    int
	path  string
	fault *GrantError
}

// openGrant opens grant as the ruleset will name it (see above) and returns
// an O_PATH descriptor (close-on-exec) of what it resolves to. A missing
// path is an error wrapping ENOENT, which the caller skips, as the ruleset
// skips a missing grant.
func openGrant(grant string) (fd int, err error) {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	stack := []walkDir{{fd: root, path: "/"}}
	stack[0].fault, err = dirFault(grant, root, "/", nil)
	defer func() {
		for _, d := range stack {
			if d.fd != fd || err != nil {
				unix.Close(d.fd)
			}
		}
	}()
	if err != nil {
		return -1, err
	}
	rest := grant
	for links := 0; ; {
		var name string
		name, rest, _ = strings.Cut(strings.TrimLeft(rest, "/"), "/")
		top := stack[len(stack)-1]
		switch name {
		case "":
			return top.fd, nil
		case ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(top.fd)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		next := joinPath(top.path, name)
		nfd, err := unix.Openat(top.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("granted path %s: %s: %w", grant, next, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(nfd, &st); err != nil {
			unix.Close(nfd)
			return -1, fmt.Errorf("granted path %s: %s: %w", grant, next, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			d := walkDir{fd: nfd, path: next, fault: top.fault}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR && d.fault == nil {
				d.fault = dirStatFault(grant, next, &st)
			}
			stack = append(stack, d)
			continue
		}
		// A symlink: followed only from trusted directories, and only if
		// its owner is trusted too.
		if top.fault != nil {
			unix.Close(nfd)
			e := *top.fault
			e.Link = next
			return -1, &e
		}
		if !trustedUID(st.Uid) {
			unix.Close(nfd)
			return -1, &GrantError{Grant: grant, Kind: "symlink", Path: next, UID: st.Uid, Mode: st.Mode & 0o7777, Problem: "is not owned by root or the host's user"}
		}
		if links++; links > maxGrantLinks {
			unix.Close(nfd)
			return -1, fmt.Errorf("granted path %s: symlink loop: more than %d symlinks followed (the last %s)", grant, maxGrantLinks, next)
		}
		target, err := readlinkFD(nfd)
		unix.Close(nfd)
		if err != nil {
			return -1, fmt.Errorf("granted path %s: %s: %w", grant, next, err)
		}
		if strings.HasPrefix(target, "/") {
			for _, d := range stack[1:] {
				unix.Close(d.fd)
			}
			stack = stack[:1]
		}
		rest = target + "/" + rest
	}
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// readlinkFD reads the target of the symlink fd (O_PATH|O_NOFOLLOW) names.
func readlinkFD(fd int) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

func trustedUID(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// dirFault applies the directory rule to the directory fd (at path): nil
// if it passes and parent (its parent's fault) is nil.
func dirFault(grant string, fd int, path string, parent *GrantError) (*GrantError, error) {
	if parent != nil {
		return parent, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("granted path %s: %s: %w", grant, path, err)
	}
	return dirStatFault(grant, path, &st), nil
}

func dirStatFault(grant, path string, st *unix.Stat_t) *GrantError {
	e := &GrantError{Grant: grant, Kind: "directory", Path: path, UID: st.Uid, Mode: st.Mode & 0o7777}
	switch {
	case !trustedUID(st.Uid):
		e.Problem = "is not owned by root or the host's user"
	case st.Mode&0o022 != 0 && !(st.Mode&unix.S_ISVTX != 0 && st.Uid == 0):
		e.Problem = "is writable by group or others"
		if st.Mode&unix.S_ISVTX != 0 {
			e.Problem += " (its sticky bit protects what is inside only when root owns it)"
		}
	default:
		return nil
	}
	return e
}

// checkGrants walks every path grant of s as the launcher will (Resolve's
// refusal, with the same message).
func checkGrants(s *Spec) error {
	for _, p := range grantedPaths(s) {
		fd, err := openGrant(p)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if errors.Is(err, unix.ENOENT) {
			continue // skipped as the ruleset skips it
		}
		var ge *GrantError
		if errors.As(err, &ge) {
			return err
		}
		// Anything else (a component not a directory, a loop) is the
		// ruleset's to fail on at launch, as before.
	}
	return nil
}

// grantedPaths are every path the manifest grants, as the ruleset names
// them (globs expanded): files, devices and unix sockets.
func grantedPaths(s *Spec) []string {
	out := manifestPaths(s)
	for _, p := range s.Network.Unix {
		out = append(out, expand(p)...)
	}
	return out
}

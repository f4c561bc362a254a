// Package trust decides whether the host may act on a file it finds on
// disk: a plugin binary it runs, or a manifest or config file it takes a
// plugin's privileges from. A root host that runs a binary, or grants what a
// file says, lets whoever can write that file — or swap it, or swap any
// directory or symlink on the way to it — run code with those privileges.
// So, as sshd's StrictModes does for authorized_keys, a strict Policy wants
// the file and everything on the way to it owned by root or the host's user
// and writable by nobody else.
//
// It also reads such files safely, strict or not: regular files only, of
// bounded size, opened without blocking (a FIFO named as a manifest must not
// hang the host) and without following a symlink swapped in after the path
// was resolved.
package trust

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxLinks bounds the symlinks followed resolving one path, as the kernel's
// MAXSYMLINKS does.
const maxLinks = 40

// Policy says what the host requires of the files it acts on.
//
// Strict applies these rules, each to what resolving the path actually
// visits (a directory reached through a symlink is checked where it is):
//
//   - every directory a name is looked up in, from / down, is owned by root
//     or the host's user and not writable by group or others — unless it is
//     sticky and owned by root (like /tmp): there nobody can rename or
//     remove what they do not own;
//   - every symlink followed is owned by root or the host's user (in a
//     sticky directory its owner could replace it);
//   - the file itself is owned by root or the host's user and not writable
//     by group or others.
//
// A POSIX ACL that grants someone write access shows in the group bits (the
// ACL mask), so it is refused as group-writable.
type Policy struct {
	// Strict applies the rules. Without it paths are only resolved, and
	// files only read safely.
	Strict bool
	// Override names what lifts the rules (a host flag), for messages.
	Override string
}

// Error says why a path is not trusted and how to fix it.
type Error struct {
	Kind     string // "file", "directory" or "symlink"
	Path     string // what is at fault
	Of       string // the path being checked, when Path is on the way to it
	UID      uint32
	Mode     uint32 // permission, setuid/setgid and sticky bits
	Problem  string
	Fix      string // a command that fixes it
	Override string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", e.Kind, e.Path)
	if e.Of != "" && e.Of != e.Path {
		fmt.Fprintf(&b, " (on the way to %s)", e.Of)
	}
	fmt.Fprintf(&b, " %s (owner %s, mode %04o): run %s", e.Problem, owner(e.UID), e.Mode, e.Fix)
	if e.Override != "" {
		fmt.Fprintf(&b, ", or start the host with %s", e.Override)
	}
	return b.String()
}

func owner(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// Resolve returns the absolute path with every symlink resolved, and the
// Lstat of what it names. Under Strict it checks every directory looked up
// in and every symlink followed on the way (not the file itself: Executable
// and ReadFile check that, on what they use).
func (p Policy) Resolve(path string) (string, fs.FileInfo, error) {
	abs := path
	if !filepath.IsAbs(path) {
		// Not filepath.Abs: cleaning "link/.." lexically is not where the
		// kernel goes when link is a symlink.
		wd, err := os.Getwd()
		if err != nil {
			return "", nil, err
		}
		abs = wd + "/" + path
	}
	var err error
	checked := map[string]bool{}
	resolved, rest := "/", abs
	var fi fs.FileInfo
	var link, linkTarget string // the last symlink followed, for messages
	for links := 0; ; {
		var name string
		name, rest, _ = strings.Cut(strings.TrimLeft(rest, "/"), "/")
		switch name {
		case "":
			if fi == nil { // the path is /
				fi, err = os.Lstat(resolved)
				if err != nil {
					return "", nil, err
				}
			}
			return resolved, fi, nil
		case ".":
			continue
		case "..":
			resolved, fi = filepath.Dir(resolved), nil
			continue
		}
		if p.Strict && !checked[resolved] {
			if err := p.checkDir(resolved, abs); err != nil {
				return "", nil, err
			}
			checked[resolved] = true
		}
		next := filepath.Join(resolved, name)
		if fi, err = os.Lstat(next); err != nil {
			if link != "" && errors.Is(err, fs.ErrNotExist) {
				return "", nil, fmt.Errorf("%s: dangling symlink: %s points to %s, and %s does not exist", abs, link, linkTarget, next)
			}
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if rest != "" && !fi.IsDir() {
				return "", nil, fmt.Errorf("%s: %s is not a directory", abs, next)
			}
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return "", nil, fmt.Errorf("%s: symlink loop: more than %d symlinks followed (the last %s)", abs, maxLinks, next)
		}
		if p.Strict {
			if err := p.checkOwner("symlink", next, fi, abs); err != nil {
				return "", nil, err
			}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", nil, err
		}
		link, linkTarget = next, target
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = target + "/" + rest
		fi = nil
	}
}

// Executable resolves path, which must name a regular file with an execute
// bit (trusted, under Strict), and returns the resolved path and its Lstat.
func (p Policy) Executable(path string) (string, fs.FileInfo, error) {
	target, fi, err := p.Resolve(path)
	if err != nil {
		return "", nil, err
	}
	if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%s is not a regular file (it is a %s)", target, kind(fi.Mode()))
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", nil, fmt.Errorf("%s is not executable (mode %04o): run chmod +x %s", target, mode(fi), target)
	}
	if p.Strict {
		if err := p.checkFile(target, fi, path); err != nil {
			return "", nil, err
		}
	}
	return target, fi, nil
}

// ReadFile resolves path and reads the regular file it names, of at most
// limit bytes (trusted, under Strict). It never blocks on a FIFO or a device
// and never opens one: what the walk found is checked before opening, and
// the opened file (fstat) again after.
func (p Policy) ReadFile(path string, limit int64) ([]byte, error) {
	target, fi, err := p.Resolve(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (it is a %s)", target, kind(fi.Mode()))
	}
	// O_NOFOLLOW: a symlink swapped in since the walk is refused (ELOOP), not
	// followed; O_NONBLOCK: so is a FIFO, instead of waiting for a writer.
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (it is a %s)", target, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d this file may have", target, fi.Size(), limit)
	}
	if p.Strict {
		if err := p.checkFile(target, fi, path); err != nil {
			return nil, err
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1)) // +1: a file that grew since fstat
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is more than the %d bytes this file may have", target, limit)
	}
	return data, nil
}

// checkDir applies the directory rule to dir, which is on the way to of.
func (p Policy) checkDir(dir, of string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if err := p.checkOwner("directory", dir, fi, of); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm()&0o022 == 0 || (fi.Mode()&fs.ModeSticky != 0 && st.Uid == 0) {
		return nil
	}
	problem := "is writable by group or others"
	if fi.Mode()&fs.ModeSticky != 0 {
		problem += " (its sticky bit protects what is inside only when root owns it)"
	}
	return p.fail("directory", dir, of, fi, problem, "chmod go-w "+dir)
}

// checkFile applies the file rule to fi, the file at path.
func (p Policy) checkFile(path string, fi fs.FileInfo, of string) error {
	if err := p.checkOwner("file", path, fi, of); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return p.fail("file", path, of, fi, "is writable by group or others", "chmod go-w "+path)
	}
	return nil
}

func (p Policy) checkOwner(what, path string, fi fs.FileInfo, of string) error {
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if uid == 0 || uid == uint32(os.Geteuid()) {
		return nil
	}
	chown := "chown root "
	if what == "symlink" {
		chown = "chown -h root "
	}
	return p.fail(what, path, of, fi, "is not owned by root or the host's user", chown+path)
}

func (p Policy) fail(what, path, of string, fi fs.FileInfo, problem, fix string) error {
	return &Error{
		Kind: what, Path: path, Of: of, UID: fi.Sys().(*syscall.Stat_t).Uid, Mode: mode(fi),
		Problem: problem, Fix: fix, Override: p.Override,
	}
}

// mode returns fi's permission, setuid/setgid and sticky bits as chmod
// writes them.
func mode(fi fs.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Mode & 0o7777 }

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "special file (" + m.Type().String() + ")"
}

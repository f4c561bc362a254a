package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/host/internal/trust"
)

// RuntimeDir is one host instance's directory for its plugins' sockets:
// go-plugin makes each start's socket directory in it (Options.SocketParent).
// It is <base>/host-<pid>-<start time>, the host's pid and the kernel's
// start time of that process, so a later host can tell a directory whose
// host is gone (killed with SIGKILL, say) from one whose host still runs,
// even once the pid has been reused, and remove it.
type RuntimeDir struct {
	// Path of this instance's directory.
	Path string
}

// A unix socket's path is at most 107 bytes (sun_path, NUL included), and
// the socket go-plugin makes for a plugin is
// <instance dir>/plugin-dir<up to 10 digits>/plugin<up to 10 digits>.
const (
	maxSocketPath = 107
	socketSuffix  = "/plugin-dir0123456789/plugin0123456789"
)

// instanceName is the naming scheme of instance directories; nothing else
// in a runtime base is ever removed.
var instanceName = regexp.MustCompile(`^host-([0-9]+)-([0-9]+)$`)

// DefaultRuntimeBase is where instance directories go unless
// --plugin.runtime-dir says otherwise: systemd's $RUNTIME_DIRECTORY (the
// unit's RuntimeDirectory=), else /run/plexporter for root, else
// $XDG_RUNTIME_DIR/plexporter, else $TMPDIR/plexporter-<uid>.
func DefaultRuntimeBase() string { return runtimeBase(os.Getenv, os.Geteuid()) }

func runtimeBase(getenv func(string) string, euid int) string {
	if d := getenv("RUNTIME_DIRECTORY"); d != "" {
		first, _, _ := strings.Cut(d, ":") // systemd lists one per RuntimeDirectory= entry
		return first
	}
	if euid == 0 {
		return "/run/plexporter"
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "plexporter")
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "plexporter-"+strconv.Itoa(euid))
}

// OpenRuntimeDir makes this host instance's directory in base ("" for
// DefaultRuntimeBase), after removing the instance directories of hosts
// that are gone. base is made if missing. It must belong to the host's
// user, and every directory above it must follow trust's rules, since
// whoever can write there can replace a plugin's socket; a base the host
// owns but others may write to (not a shared sticky one like /tmp) is made
// private first. Close removes the instance directory again.
func OpenRuntimeDir(base string, log *slog.Logger) (*RuntimeDir, error) {
	if base == "" {
		base = DefaultRuntimeBase()
	}
	if err := os.MkdirAll(base, 0o711); err != nil {
		return nil, fmt.Errorf("plugin runtime directory: %w (choose another with --plugin.runtime-dir)", err)
	}
	resolved, fi, err := trust.Policy{Strict: true}.Resolve(base)
	if err != nil {
		return nil, fmt.Errorf("plugin runtime directory %s: %w", base, err)
	}
	euid := os.Geteuid()
	switch owner, mode := ownerOf(fi), fi.Mode(); {
	case !fi.IsDir():
		return nil, fmt.Errorf("plugin runtime directory %s is not a directory (choose another with --plugin.runtime-dir)", resolved)
	case owner != euid || mode&fs.ModeSticky != 0 && mode.Perm()&0o022 != 0:
		return nil, fmt.Errorf("plugin runtime directory %s must be the host's own: belong to uid %d and be writable by nobody else (it has owner %d, mode %s): whoever can write there can replace a plugin's socket; run chown %d %s && chmod go-w %s, or choose another with --plugin.runtime-dir",
			resolved, euid, owner, mode, euid, resolved, resolved)
	case mode.Perm()&0o022 != 0:
		// The host's own directory, made writable by others by whoever set
		// it up (a Kubernetes emptyDir is 0777): the host sets its mode, as
		// systemd's RuntimeDirectoryMode= would, before putting anything in.
		if err := os.Chmod(resolved, mode.Perm()&^0o022); err != nil {
			return nil, fmt.Errorf("plugin runtime directory %s is writable by group or others and cannot be made private: %w", resolved, err)
		}
		log.Info("plugin runtime directory was writable by group or others; made it the host's own", "dir", resolved, "was", fmt.Sprintf("%04o", mode.Perm()), "now", fmt.Sprintf("%04o", mode.Perm()&^0o022))
	}
	removeStale(resolved, euid, log)

	self := os.Getpid()
	start, err := processStart(self)
	if err != nil {
		return nil, fmt.Errorf("plugin runtime directory: the host's own start time: %w", err)
	}
	dir := filepath.Join(resolved, fmt.Sprintf("host-%d-%d", self, start))
	if n := len(dir) + len(socketSuffix); n > maxSocketPath {
		return nil, fmt.Errorf("plugin runtime directory %s is too long: a plugin's socket in it would have a path of up to %d bytes, and unix sockets take %d; choose a shorter one with --plugin.runtime-dir", resolved, n, maxSocketPath)
	}
	// 0711: a sandboxed plugin runs as its own user and must pass through
	// to the socket directory go-plugin makes inside (handed to that user),
	// without listing the others.
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, fmt.Errorf("plugin runtime directory: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil { // whatever the umask
		os.Remove(dir)
		return nil, fmt.Errorf("plugin runtime directory: %w", err)
	}
	return &RuntimeDir{Path: dir}, nil
}

// Close removes the instance directory and whatever plugin socket
// directories are left in it, their tmpfs mounts first.
func (d *RuntimeDir) Close() error {
	unmountBelow(d.Path, nil) // a socket directory whose plugin has not been reaped yet
	return os.RemoveAll(d.Path)
}

// removeStale removes, from base, the instance directories of hosts that
// are gone: only directories (not symlinks) named by instanceName and
// owned by euid, whose pid no longer runs or now runs a process that
// started at another time. Anything else is left alone.
func removeStale(base string, euid int, log *slog.Logger) {
	entries, err := os.ReadDir(base)
	if err != nil {
		log.Warn("cannot list the plugin runtime directory for stale socket directories", "dir", base, "err", err)
		return
	}
	for _, e := range entries {
		m := instanceName.FindStringSubmatch(e.Name())
		if m == nil || e.Type() != fs.ModeDir {
			continue
		}
		path := filepath.Join(base, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() {
			continue
		}
		if ownerOf(fi) != euid {
			continue
		}
		pid, err1 := strconv.Atoi(m[1])
		start, err2 := strconv.ParseUint(m[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if running, err := processStart(pid); err == nil && running == start {
			continue // its host is alive
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue // cannot tell: keep it
		}
		// Its plugins' socket directories are still mounted (socketfs.go):
		// RemoveAll would empty them and fail on the mount points.
		unmountBelow(path, log)
		if err := os.RemoveAll(path); err != nil {
			log.Warn("cannot remove the socket directory of a host that is gone", "dir", path, "err", err)
			continue
		}
		log.Info("removed the socket directory of a host that is gone", "dir", path)
	}
}

// ownerOf is the uid that owns fi's file, or -1.
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// processStart is the kernel's start time of pid (clock ticks since boot):
// with the pid, it names one process for as long as the machine runs.
func processStart(pid int) (uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.Starttime, nil
}

package sandbox

import (
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// DefaultUser runs plugins whose manifest names no user; packaging creates it.
const DefaultUser = "plexporter"

// Host describes what the host allows and can do.
type Host struct {
	AllowRoot bool // --plugin.allow-root
	// AllowAnyUnixConnect runs plugins whose network grant needs connect(2)
	// on kernels whose Landlock cannot restrict it to the granted unix
	// sockets (--plugin.allow-any-unix-connect).
	AllowAnyUnixConnect bool
	// Roots are the host's --path.* roots, which the manifest's
	// placeholders ({sysfs}/class/infiniband) stand for: a plugin told to
	// read /host/sys is granted /host/sys.
	Roots manifest.Roots
}

// Resolve builds the Spec for a plugin, or explains why its manifest cannot
// be honoured. warnings are worth logging but do not refuse the plugin.
func Resolve(m *manifest.Manifest, binary, argv0 string, h Host) (spec *Spec, warnings []string, err error) {
	if m, err = m.Expand(h.Roots); err != nil {
		return nil, nil, fmt.Errorf("manifest: %w", err)
	}
	s := &Spec{Binary: binary, Argv0: argv0, Nofile: m.Limits.Nofile, Pids: m.Limits.Pids, Landlock: true}
	if s.UID, s.GID, warnings, err = identity(m, h); err != nil {
		return nil, warnings, err
	}
	for _, name := range m.Capabilities {
		c, err := cap.FromName(strings.ToLower(name))
		if err != nil {
			return nil, warnings, fmt.Errorf("capability %s: unknown to this host", name)
		}
		if ok, _ := cap.GetProc().GetFlag(cap.Permitted, c); !ok {
			return nil, warnings, fmt.Errorf("manifest grants %s but the host does not have it", name)
		}
		s.Caps = append(s.Caps, strings.ToLower(name))
	}
	if m.Limits.Pids > 0 {
		// No rlimit is safe for this (RLIMIT_NPROC counts every thread of the
		// uid across plugins); it needs a cgroup v2 child, which this host
		// does not create yet.
		warnings = append(warnings, fmt.Sprintf("limits.pids (%d) is not enforced: it needs a per-plugin cgroup v2 child", m.Limits.Pids))
	}
	if m.Limits.Memory != "" {
		if s.MemoryBytes, err = manifest.ParseBytes(m.Limits.Memory); err != nil {
			return nil, warnings, err
		}
	}
	s.ReadOnly, s.ReadWrite, s.Devices = m.Paths.ReadOnly, m.Paths.ReadWrite, m.Paths.Devices
	warnings = append(warnings, netEntryWarnings(slices.Concat(s.ReadOnly, s.ReadWrite))...)
	if m.Network != nil {
		s.Network = *m.Network
	}
	s.PIDNamespace = true
	if v, err := llsyscall.LandlockGetABIVersion(); err != nil || v < 1 {
		return nil, warnings, errors.New("the kernel has no Landlock, so the manifest's path rules cannot be enforced")
	} else if len(s.Devices) > 0 && v < 5 {
		// Without ABI 5 every ioctl on every open file would be allowed:
		// more than a manifest granting ioctls on its devices means.
		return nil, warnings, fmt.Errorf("the manifest grants device ioctls, which Landlock restricts from ABI 5 on; this kernel has ABI %d", v)
	} else {
		w, err := checkNetwork(pluginName(argv0), s.Network, v, h)
		if warnings = append(warnings, w...); err != nil {
			return nil, warnings, err
		}
	}
	return s, warnings, nil
}

// identity resolves the manifest's user and group.
func identity(m *manifest.Manifest, h Host) (uid, gid int, warnings []string, err error) {
	name := m.User
	if name == "" {
		name = DefaultUser
	}
	u, err := lookupUser(name)
	if err != nil && m.User == "" {
		warnings = append(warnings, fmt.Sprintf("user %q does not exist; running the plugin as nobody/nogroup (create the %s user)", DefaultUser, DefaultUser))
		u, err = lookupUser("nobody")
	}
	if err != nil {
		return 0, 0, warnings, fmt.Errorf("user %q: %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	switch {
	case m.Group != "":
		if gid, err = lookupGroup(m.Group); err != nil {
			return 0, 0, warnings, fmt.Errorf("group %q: %w", m.Group, err)
		}
	case m.User == "" && u.Username == "nobody":
		if g, err := lookupGroup("nogroup"); err == nil {
			gid = g
		}
	}
	if uid == 0 || gid == 0 {
		if !(m.AllowRoot && h.AllowRoot) {
			return 0, 0, warnings, errors.New("running as root (uid or gid 0) needs allow_root in the manifest and --plugin.allow-root on the host")
		}
		warnings = append(warnings, "plugin runs as root, allowed by manifest and host")
	}
	return uid, gid, warnings, nil
}

func lookupUser(name string) (*user.User, error) {
	if _, err := strconv.Atoi(name); err == nil {
		return user.LookupId(name)
	}
	return user.Lookup(name)
}

func lookupGroup(name string) (int, error) {
	if id, err := strconv.Atoi(name); err == nil {
		return id, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

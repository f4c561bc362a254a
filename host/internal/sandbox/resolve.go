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
	if err := resolveLimits(s, m.Limits); err != nil {
		return nil, warnings, err
	}
	warnings = append(warnings, cgroupWarning()...)
	s.ReadOnly, s.ReadWrite, s.Devices = m.Paths.ReadOnly, m.Paths.ReadWrite, m.Paths.Devices
	warnings = append(warnings, netEntryWarnings(slices.Concat(s.ReadOnly, s.ReadWrite))...)
	if m.Network != nil {
		s.Network = *m.Network
	}
	s.PIDNamespace = !m.PIDNamespace.Host()
	s.NetNamespace = ownNetNamespace(s.Network, h.Roots.Procfs, s.ReadOnly, s.ReadWrite, s.Devices)
	s.Metadata = len(s.ReadWrite) > 0
	// A symlink on the way to a grant that someone else could repoint
	// (grants.go); the launcher checks again at every start.
	if err := checkGrants(s); err != nil {
		return nil, warnings, err
	}
	if v, err := landlockABI(); err != nil || v < 1 {
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
		if !s.PIDNamespace {
			if s.ScopeSignals, err = checkHostPIDNamespace(pluginName(argv0), m, s.UID, v); err != nil {
				return nil, warnings, err
			}
		}
	}
	return s, warnings, nil
}

// landlockABI is the kernel's Landlock ABI version; a variable so that
// tests can decide Resolve's answers for kernels other than their own.
var landlockABI = llsyscall.LandlockGetABIVersion

// abiScopeSignal is the Landlock ABI that scopes signals (and abstract unix
// sockets) to the sender's domain.
const abiScopeSignal = 6

// checkHostPIDNamespace decides whether a plugin may run in the host's PID
// namespace (pid_namespace: host), where it sees every process. ptrace is
// denied by Landlock to processes outside the plugin's domain on every ABI;
// kill(2) is allowed by the kernel to any process of the same uid, and every
// plugin without a user of its own runs as DefaultUser, as does everything
// else that user runs. From ABI 6 the plugin's domain scopes signals (the
// launcher then refuses to start it without; scopeSignals is true); below
// it, only a user of its own stands between the plugin and the other
// plugins, so the plugin is refused unless its manifest names one.
func checkHostPIDNamespace(plugin string, m *manifest.Manifest, uid, abi int) (scopeSignals bool, err error) {
	if abi >= abiScopeSignal {
		return true, nil
	}
	risk := fmt.Sprintf("plugin %q: its manifest sets pid_namespace: host, where it could signal every process of its uid, and this kernel's Landlock (ABI %d) cannot scope signals to the plugin's domain (ABI %d)", plugin, abi, abiScopeSignal)
	if m.User == "" {
		return false, fmt.Errorf("%s; it runs as the default plugin user %q, shared by every plugin without a user of its own; give it a user of its own in its manifest, remove pid_namespace: host, or run a kernel with Landlock ABI %d or later", risk, DefaultUser, abiScopeSignal)
	}
	if shared, ok := sharedUID(uid); ok {
		return false, fmt.Errorf("%s; its manifest's user %q has the uid %d of %s; give it a user of its own, remove pid_namespace: host, or run a kernel with Landlock ABI %d or later", risk, m.User, uid, shared, abiScopeSignal)
	}
	return false, nil
}

// sharedUID names who else runs as uid, if a plugin in the host's PID
// namespace without a signal scope must not: root (a uid-0 plugin could
// signal the host itself), the default plugin user, or nobody, which stands
// in for it where packaging has not created it.
func sharedUID(uid int) (string, bool) {
	if uid == 0 {
		return "root, the host's own", true
	}
	for _, name := range []string{DefaultUser, "nobody"} {
		if u, err := lookupUser(name); err == nil && u.Uid == strconv.Itoa(uid) {
			return fmt.Sprintf("the user %q, which other plugins run as by default", name), true
		}
	}
	return "", false
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

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/plexporter/plexporter/sdk/transport"
)

// Launch is the launcher's main: it confines the current process as the
// Spec on its command line says and execs the plugin with the environment
// the host built for it (host/internal/launch), unchanged. It never returns;
// on any failure it exits with a message on stderr (the host logs it under
// the plugin's name), so a plugin never runs less confined than asked.
func Launch() { launch(LaunchArg) }

// LaunchChild is the main of the launcher that a plugin's PID-namespace
// init starts (see runInit); it confines itself and execs the plugin as
// Launch does. It never returns.
func LaunchChild() { launch(ChildArg) }

func launch(role string) {
	// Per-thread attributes (parent-death signal, Landlock domain, seccomp
	// filter) are set on the thread that execs.
	runtime.LockOSThread()
	spec, err := decodeSpec(os.Args[1:], role)
	if err == nil && role == LaunchArg && spec.PIDNamespace {
		if os.Getpid() != 1 {
			err = fmt.Errorf("the spec asks for a PID namespace but the launcher is pid %d, not its init", os.Getpid())
		} else {
			runInit(spec, os.Args[2]) // never returns
		}
	}
	if err == nil {
		err = apply(spec)
	}
	if err == nil {
		err = syscall.Exec(spec.executable(), []string{spec.Argv0}, os.Environ())
		err = fmt.Errorf("exec %s: %w", spec.Binary, err)
	}
	fmt.Fprintf(os.Stderr, "[ERROR] plexporter sandbox: %v\n", err)
	os.Exit(126)
}

func apply(s *Spec) error {
	ppid := os.Getppid()
	if err := limits(s); err != nil {
		return err
	}
	// The ruleset is built while still root: opening the granted paths must
	// not depend on the plugin user's own permissions.
	rulesetFD := -1
	var rulesetFlags uint32
	if err := checkSignalScope(s); err != nil {
		return err
	}
	if s.Landlock {
		// Held before the ruleset is built, so that the rules name the
		// inodes these descriptors keep (pin.go); never closed: the plugin
		// inherits them.
		if _, err := pinProcfs(manifestPaths(s)); err != nil {
			return err
		}
		var err error
		rs, release, err := rules(s)
		if err != nil {
			return err
		}
		rulesetFD, rulesetFlags, err = landlockConfig.EnableLoggingForSubprocesses().NewRulesetFD(rs...)
		release()
		if err != nil {
			return fmt.Errorf("landlock ruleset: %w", err)
		}
		if rulesetFD < 0 {
			return fmt.Errorf("landlock is not available, the path rules cannot be enforced")
		}
		defer unix.Close(rulesetFD)
	}
	if err := joinOwnKeyring(); err != nil { // as root (metadata.go)
		return err
	}
	if err := credentials(s); err != nil {
		return err
	}
	// no_new_privs on every thread: setuid binaries and file capabilities
	// cannot give the plugin (or anything it runs) more than it has.
	if _, err := cap.Prctlw(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if rulesetFD >= 0 {
		// This thread (locked, never unlocked) is the one that execs, and
		// exec keeps its Landlock domain.
		if err := llsyscall.LandlockRestrictSelf(rulesetFD, rulesetFlags); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	// The network grant's socket filter, on the same thread for the same
	// reason: a seccomp filter belongs to the thread and survives exec.
	if err := installFilter(s.Network, 0); err != nil {
		return err
	}
	if err := installStateFilter(s); err != nil { // keys, file metadata
		return err
	}
	if !s.PIDNamespace {
		// Other processes' pids mean something to it (hostpid.go).
		raw, err := hostPIDFilter()
		if err == nil {
			err = loadFilter("host PID namespace", raw, 0)
		}
		if err != nil {
			return err
		}
	}
	return rearmParentDeathSignal(ppid)
}

// checkSignalScope refuses to start a plugin whose spec needs its domain
// to scope signals (ScopeSignals: it shares the host's PID namespace) when
// this kernel's domain would not. landlockConfig asks for the scope best
// effort, which drops it silently below ABI 6; Resolve has refused that
// already, and this holds it where the launcher runs, whatever the host's
// kernel said when it resolved the spec.
func checkSignalScope(s *Spec) error {
	if !s.ScopeSignals {
		return nil
	}
	abi, err := llsyscall.LandlockGetABIVersion()
	if !s.Landlock || err != nil || abi < abiScopeSignal || landlockConfig.Scoped&llsyscall.ScopeSignal == 0 {
		return fmt.Errorf("the plugin runs in the host's PID namespace and its Landlock domain would not scope signals (Landlock ABI %d, %d needed)", abi, abiScopeSignal)
	}
	return nil
}

// rearmParentDeathSignal sets the parent-death signal again. The host set it
// when it forked the launcher (host/internal/launch), but the kernel clears
// it when a process changes its credentials, which the launcher has just
// done; exec keeps it from here on. The host may have died in between, and
// then no signal would ever come: the parent's pid tells, or, in a PID
// namespace (whose init is the parent), the lifeline.
func rearmParentDeathSignal(hostPID int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(transport.ParentDeathSignal), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != hostPID || hostGone() {
		return fmt.Errorf("the host exited during launch")
	}
	return nil
}

// credentials switches to the plugin's uid/gid keeping exactly the granted
// capabilities: ambient, inheritable, permitted and effective hold them, the
// bounding set holds nothing else.
func credentials(s *Spec) error {
	granted := make([]cap.Value, 0, len(s.Caps))
	for _, name := range s.Caps {
		c, err := cap.FromName(name)
		if err != nil {
			return err
		}
		granted = append(granted, c)
	}
	var drop []cap.Value
	for c := cap.Value(0); c < cap.MaxBits(); c++ {
		if !slices.Contains(granted, c) {
			drop = append(drop, c)
		}
	}
	if err := cap.DropBound(drop...); err != nil {
		return fmt.Errorf("drop bounding set: %w", err)
	}
	if err := cap.SetGroups(s.GID); err != nil {
		return fmt.Errorf("setgroups/setgid %d: %w", s.GID, err)
	}
	if err := cap.SetUID(s.UID); err != nil { // keeps the permitted set
		return fmt.Errorf("setuid %d: %w", s.UID, err)
	}
	set := cap.NewSet()
	for _, f := range []cap.Flag{cap.Permitted, cap.Effective, cap.Inheritable} {
		if err := set.SetFlag(f, true, granted...); err != nil {
			return err
		}
	}
	if err := set.SetProc(); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	if err := cap.ResetAmbient(); err != nil {
		return fmt.Errorf("reset ambient: %w", err)
	}
	if len(granted) > 0 {
		if err := cap.SetAmbient(true, granted...); err != nil {
			return fmt.Errorf("raise ambient %v: %w", s.Caps, err)
		}
	}
	return nil
}

// rules lists what the plugin may touch: its manifest's paths and, always,
// its own binary, the dynamic loader's libraries, /dev/null and go-plugin's
// socket directory. The manifest's paths are opened by openGrant (grants.go)
// and named by their descriptors (/proc/self/fd/N), which release closes
// once the ruleset is built.
func rules(s *Spec) (out []landlock.Rule, release func(), err error) {
	var fds []int
	release = func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	kind := func(path string, file, dir func(...string) landlock.FSRule) landlock.FSRule {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return dir(path)
		}
		return file(path)
	}
	grant := func(paths []string, file, dir func(...string) landlock.FSRule, ioctl bool) error {
		for _, p := range paths {
			for _, m := range expand(p) {
				fd, err := openGrant(m)
				if errors.Is(err, unix.ENOENT) {
					continue // a missing grant is ignored, as IgnoreIfMissing does
				}
				if err != nil {
					return err
				}
				fds = append(fds, fd)
				r := kind("/proc/self/fd/"+strconv.Itoa(fd), file, dir)
				if ioctl {
					r = r.WithIoctlDev()
				}
				out = append(out, r)
			}
		}
		return nil
	}
	add := func(paths []string, file, dir func(...string) landlock.FSRule) {
		for _, p := range paths {
			for _, m := range expand(p) {
				out = append(out, kind(m, file, dir).IgnoreIfMissing())
			}
		}
	}
	for _, g := range []struct {
		paths     []string
		file, dir func(...string) landlock.FSRule
		ioctl     bool
	}{
		{s.ReadOnly, landlock.ROFiles, landlock.RODirs, false},
		{s.ReadWrite, landlock.RWFiles, landlock.RWDirs, false},
		{s.Devices, landlock.RWFiles, landlock.RWDirs, true},
	} {
		if err := grant(g.paths, g.file, g.dir, g.ioctl); err != nil {
			release()
			return nil, nil, err
		}
	}
	// Connecting to the unix sockets the network grant names (network.go).
	resolveUnix := func(paths ...string) landlock.FSRule {
		return landlock.PathAccess(llsyscall.AccessFSResolveUnix, paths...)
	}
	if err := grant(s.Network.Unix, resolveUnix, resolveUnix, false); err != nil {
		release()
		return nil, nil, err
	}
	add([]string{s.executable(), "/etc/ld.so.cache"}, landlock.ROFiles, landlock.RODirs)
	add([]string{"/lib", "/lib64", "/usr/lib", "/usr/lib64"}, landlock.ROFiles, landlock.RODirs)
	add([]string{"/dev/null"}, landlock.RWFiles, landlock.RWDirs)
	if s.SocketDir != "" {
		add([]string{s.SocketDir}, landlock.RWFiles, landlock.RWDirs)
	}
	return append(out, netRules(s.Network)...), release, nil
}

// expand is a granted path as the ruleset names it: its glob's matches, or
// the path itself if nothing matches (a missing path is ignored then).
func expand(pattern string) []string {
	if matches, _ := filepath.Glob(pattern); len(matches) > 0 {
		return matches
	}
	return []string{pattern}
}

// manifestPaths are the manifest's path grants as the ruleset names them.
// The implicit ones (binary, libraries, /dev/null, socket directory) are
// never on procfs.
func manifestPaths(s *Spec) []string {
	var out []string
	for _, list := range [][]string{s.ReadOnly, s.ReadWrite, s.Devices} {
		for _, p := range list {
			out = append(out, expand(p)...)
		}
	}
	return out
}

// landlockConfig is what a sandboxed process's Landlock domain restricts:
// every filesystem right up to ABI 9 (which adds connect(2) to pathname
// unix sockets, so that a network.unix grant holds per path), TCP bind and
// connect, and the abstract unix socket and signal scopes. UDP ports (ABI
// 10) are not handled: the seccomp filter allows UDP only to a plugin
// granted all of it. Best effort: a right the kernel lacks is dropped, and
// Resolve has refused the grants that depend on one (or the operator has
// accepted them).
var landlockConfig = landlock.Config{
	HandledAccessFS:  landlock.V9.HandledAccessFS,
	HandledAccessNet: landlock.V7.HandledAccessNet,
	Scoped:           landlock.V7.Scoped,
}.BestEffort()

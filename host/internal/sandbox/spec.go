// Package sandbox confines a plugin to what its manifest grants, from the
// outside: the host re-executes itself as a small launcher (Launch) that
// sets credentials, capabilities, no_new_privs, Landlock rules and limits on
// itself and then execs the plugin binary. Nothing depends on the plugin's
// cooperation, so vendor plugins in any language are confined alike.
//
// Resolve turns a manifest into a Spec on the host side and refuses what
// cannot be honoured (missing user, a capability the host lacks, a kernel
// without Landlock for a manifest that restricts paths): a plugin is never
// run with more privilege than its manifest says.
package sandbox

import (
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// LaunchArg is the first argument of the host binary in launcher mode; the
// second is the Spec as JSON. The Spec travels on the command line, not in
// the environment, so the environment the host builds for a plugin is the one
// it gets, unchanged by the launcher (exec replaces the command line).
const LaunchArg = "__plexporter-sandbox-launch"

// ChildArg is LaunchArg's counterpart for the launcher that the PID
// namespace's init (see runInit) starts below itself: it confines itself
// and execs the plugin, with the same Spec.
const ChildArg = "__plexporter-sandbox-child"

// Spec is everything the launcher applies before exec.
type Spec struct {
	Binary string `json:"binary"` // resolved path, for messages
	// BinaryFD is the launcher's descriptor of the binary the host hashed:
	// what is executed (/proc/self/fd/<BinaryFD>) and what the Landlock rule
	// for the binary names, so that a file renamed over Binary after the
	// host's check is never run. 0: execute Binary by path (tests).
	BinaryFD    int      `json:"binary_fd"`
	Argv0       string   `json:"argv0"` // the name it was installed under
	UID         int      `json:"uid"`
	GID         int      `json:"gid"`
	Caps        []string `json:"caps"`       // ambient = permitted = effective; bounding = these only
	ReadOnly    []string `json:"read_only"`  // files or directories
	ReadWrite   []string `json:"read_write"` // files or directories
	Devices     []string `json:"devices"`    // read/write + ioctl on device files (globs expanded at launch)
	SocketDir   string   `json:"socket_dir"` // go-plugin's unix socket directory
	MemoryBytes int64    `json:"memory"`     // 0: none
	Pids        int      `json:"pids"`       // 0: none (needs a cgroup)
	Nofile      int      `json:"nofile"`     // 0: inherit
	CPU         float64  `json:"cpu"`        // CPUs, 0: none (needs a cgroup)
	// FileSizeBytes is RLIMIT_FSIZE, the largest file the plugin may
	// write; 0: inherit.
	FileSizeBytes int64 `json:"file_size"`
	// Cgroups are the plugin's group's directories (one per v1 hierarchy)
	// that the launcher joins; none: rlimits only (limits.go). The host
	// makes the group per start (host/internal/cgroup) and fills this in.
	Cgroups  []string `json:"cgroups"`
	Landlock bool     `json:"landlock"` // apply path rules
	// Network is the manifest's network grant, enforced by a seccomp filter
	// on socket families and protocols and by Landlock's port and unix
	// socket rules (network.go). The zero value grants nothing.
	Network manifest.Network `json:"network"`
	// PIDNamespace: the host starts the launcher with CLONE_NEWPID; the
	// launcher stays as the namespace's init and runs the plugin below it,
	// so that every process the plugin starts dies with it (pidns.go).
	PIDNamespace bool `json:"pid_namespace"`
	// NetNamespace: the host starts the launcher with CLONE_NEWNET, for a
	// plugin that is granted no network (namespaces.go). Every launcher
	// gets an IPC namespace of its own.
	NetNamespace bool `json:"net_namespace"`
	// Metadata: the plugin may change file modes, owners, times and
	// extended attributes (it has a read-write grant); else seccomp denies
	// those calls (metadata.go).
	Metadata bool `json:"metadata"`
	// ScopeSignals: the plugin's Landlock domain must scope signals, or the
	// launcher refuses to start it. Set for a plugin in the host's PID
	// namespace (manifest pid_namespace: host), for which the scope is what
	// keeps it from signalling the processes of its uid (resolve.go).
	ScopeSignals bool `json:"scope_signals"`
}

// LauncherArgs returns the host binary's arguments that make it the
// launcher for s.
func (s *Spec) LauncherArgs() ([]string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return []string{LaunchArg, string(b)}, nil
}

// SysProcAttr is how the host must start the launcher for s: in the
// namespaces of its own that s asks for (namespaces.go).
func (s *Spec) SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Cloneflags: s.cloneFlags()}
}

// executable is the path the launcher executes and grants: the host's
// descriptor of the binary where there is one.
func (s *Spec) executable() string {
	if s.BinaryFD > 0 {
		return "/proc/self/fd/" + strconv.Itoa(s.BinaryFD)
	}
	return s.Binary
}

// decodeSpec reads the arguments (os.Args[1:]) of the launcher started as
// role (LaunchArg or ChildArg).
func decodeSpec(args []string, role string) (*Spec, error) {
	if len(args) != 2 || args[0] != role {
		return nil, fmt.Errorf("usage: %s <spec>; the launcher is started by plexporter only", role)
	}
	var s Spec
	if err := json.Unmarshal([]byte(args[1]), &s); err != nil {
		return nil, fmt.Errorf("launcher spec: %w", err)
	}
	return &s, nil
}

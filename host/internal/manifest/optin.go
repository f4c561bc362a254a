package manifest

import (
	"fmt"
	"slices"
)

// A capability is known-safe when what it adds, under the sandbox every
// plugin gets, stays inside what the manifest's own grants name, whatever
// else the manifest says. Every other capability a manifest grants needs the
// operator's opt-in in the host's config file
// (plugins.<name>.allow_capabilities), so that a manifest shipped beside a
// binary (a vendor's, a third party's) cannot by itself hand a plugin power
// over the node. docs/security.md ("Capabilities that need the operator's
// opt-in") gives the reasons below in full.
//
// CAP_DAC_READ_SEARCH bypasses read and search permission only, never
// write. Landlock checks every open (open_by_handle_at(2) included: the
// check is made on the opened file) against the manifest's read grants,
// so the plugin reads files of any mode, but only inside those grants. A
// device grant is the exception: with it the capability reads the raw
// device (every file on a disk), so a manifest granting devices needs the
// opt-in for it too.
//
// Not known-safe, for instance: CAP_DAC_OVERRIDE (writes any file inside a
// read_write grant whatever its owner and, below Landlock ABI 3, which has
// no truncate right, truncate(2)s any file on the node; with
// --plugin.allow-any-unix-connect it connects to every unix socket, the
// container runtime's included), CAP_NET_RAW (the socket filter admits no
// raw or packet socket, but the capability sets IP_TRANSPARENT and
// SO_MARK: sending from addresses not the node's, bypassing firewall marks),
// CAP_NET_BIND_SERVICE (a UDP grant then binds any port below 1024,
// standing in for a node service), CAP_SYSLOG (clears the kernel log and
// reveals kernel addresses), and everything root-equivalent: CAP_SYS_ADMIN,
// CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_SETUID, ...

// SafeCapabilities are the capabilities a manifest may grant without the
// operator's opt-in (with the condition knownSafe checks).
var SafeCapabilities = []string{"CAP_DAC_READ_SEARCH"}

// OptIn is a capability a manifest grants that needs the operator's opt-in,
// and why.
type OptIn struct {
	Capability string
	Why        string
}

// knownSafe says why capability c, granted by m, is not known-safe ("" if
// it is).
func (m *Manifest) knownSafe(c string) string {
	if !slices.Contains(SafeCapabilities, c) {
		return "not a known-safe capability"
	}
	if c == "CAP_DAC_READ_SEARCH" && len(m.Paths.Devices) > 0 {
		return "known-safe only in a manifest without paths.devices: with a device grant it reads the raw device"
	}
	return ""
}

// OptInsMissing lists the capabilities m grants that need the operator's
// opt-in and are not in allowed (the config file's allow_capabilities for
// the plugin), in the manifest's order.
func (m *Manifest) OptInsMissing(allowed []string) []OptIn {
	var out []OptIn
	for _, c := range m.Capabilities {
		why := m.knownSafe(c)
		if why == "" || slices.Contains(allowed, c) || slices.ContainsFunc(out, func(o OptIn) bool { return o.Capability == c }) {
			continue
		}
		out = append(out, OptIn{Capability: c, Why: why})
	}
	return out
}

func (o OptIn) String() string { return fmt.Sprintf("%s (%s)", o.Capability, o.Why) }

package sandbox

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// A plugin's network access is the manifest's network grant, nothing by
// default, enforced by two kernel features that each close what the other
// leaves open:
//
//   - a seccomp filter decides which sockets may exist at all: socket(2)
//     families, types and protocols, and whether connect(2) may be called.
//     Landlock's TCP rules never see MPTCP, UDP (below ABI 10), TCP Fast
//     Open or io_uring, so the filter refuses those outright.
//   - Landlock's rules decide where the allowed sockets may go: TCP ports to
//     connect to and bind, and (from ABI 9) which pathname unix sockets may
//     be connected to.

// netlinkProtocols maps manifest.NetlinkProtocols to NETLINK_* numbers.
var netlinkProtocols = map[string]uint32{
	"route":     unix.NETLINK_ROUTE,
	"generic":   unix.NETLINK_GENERIC,
	"rdma":      unix.NETLINK_RDMA,
	"sock_diag": unix.NETLINK_SOCK_DIAG,
}

// connects reports whether the grant needs connect(2): to a unix socket,
// to a TCP port, or with UDP (a connected UDP socket is how Go's and libc's
// resolvers and clients send). The filter allows connect(2) only then.
func connects(n manifest.Network) bool {
	return len(n.Unix) > 0 || n.Inet != nil && (len(n.Inet.TCPConnect) > 0 || n.Inet.UDP)
}

// Landlock ABIs the network grant depends on.
const (
	abiTCP         = 4 // TCP bind/connect port rules
	abiResolveUnix = 9 // connect(2)/sendmsg(2) to pathname unix sockets
)

// checkNetwork refuses a grant this kernel cannot hold the plugin to, and
// says what the operator can do about it.
func checkNetwork(plugin string, n manifest.Network, abi int, h Host) (warnings []string, err error) {
	if n.Inet != nil && abi < abiTCP {
		return nil, fmt.Errorf("plugin %q: its manifest grants network.inet, whose TCP ports Landlock restricts only from ABI %d and this kernel has ABI %d, so the plugin could reach every TCP port; remove network.inet or run a kernel with Landlock ABI %d or later", plugin, abiTCP, abi, abiTCP)
	}
	if connects(n) && abi < abiResolveUnix {
		risk := fmt.Sprintf("its manifest's network grant (%s) needs connect(2), which Landlock restricts to the granted unix sockets only from ABI %d; with this kernel's ABI %d the plugin could connect to every unix socket its user may write", describe(n), abiResolveUnix, abi)
		if !h.AllowAnyUnixConnect {
			return nil, fmt.Errorf("plugin %q: %s; remove the grant, run a kernel with Landlock ABI %d or later, or accept the risk with --plugin.allow-any-unix-connect", plugin, risk, abiResolveUnix)
		}
		warnings = append(warnings, fmt.Sprintf("plugin %q: %s (allowed by --plugin.allow-any-unix-connect)", plugin, risk))
	}
	return warnings, nil
}

// pluginName is the plugin's name for messages: plexporter-<name>, as
// installed (argv0), without its prefix.
func pluginName(argv0 string) string {
	return strings.TrimPrefix(filepath.Base(argv0), "plexporter-")
}

// describe names the parts of a grant that connect, for messages.
func describe(n manifest.Network) string {
	var parts []string
	if len(n.Unix) > 0 {
		parts = append(parts, fmt.Sprintf("network.unix %v", n.Unix))
	}
	if n.Inet != nil && len(n.Inet.TCPConnect) > 0 {
		parts = append(parts, fmt.Sprintf("network.inet.tcp_connect %v", n.Inet.TCPConnect))
	}
	if n.Inet != nil && n.Inet.UDP {
		parts = append(parts, "network.inet.udp")
	}
	return strings.Join(parts, ", ")
}

// netRules is Landlock's part of the grant. landlockConfig handles TCP bind
// and connect and, from ABI 9, connect to pathname unix sockets: without a
// rule, each is denied. On older kernels the unix rule is dropped (best
// effort) and checkNetwork has made the operator accept that.
func netRules(n manifest.Network) []landlock.Rule {
	var out []landlock.Rule
	if n.Inet != nil {
		for _, p := range n.Inet.TCPConnect {
			out = append(out, landlock.ConnectTCP(p))
		}
		for _, p := range n.Inet.TCPBind {
			out = append(out, landlock.BindTCP(p))
		}
	}
	// n.Unix's paths: rules opens them (grants.go).
	return out
}

// networkFilter is the seccomp program for a grant, evaluated on every
// system call of the plugin:
//
//	not the native audit arch, x32 -> ENOSYS (i386 int 0x80 or x32 calls would skip the rest)
//	socket(AF_UNIX, STREAM|SEQPACKET)          -> allow (go-plugin's listener)
//	socket(AF_NETLINK, granted protocol)       -> allow
//	socket(AF_INET|AF_INET6, STREAM, 0|TCP)    -> allow if inet is granted (Landlock checks ports)
//	socket(AF_INET|AF_INET6, DGRAM, 0|UDP)     -> allow if inet.udp is granted
//	socketpair(AF_UNIX, STREAM|SEQPACKET)      -> allow
//	any other socket or socketpair, io_uring_* -> EPERM
//	connect                                    -> EPERM unless the grant connects
//	send{to,msg,mmsg} with MSG_FASTOPEN        -> EPERM if inet is granted
//	everything else                            -> allow
//
// Unix datagram sockets are refused because sendto(2) names its peer
// without connect(2); a stream or seqpacket socket cannot. TCP Fast Open
// connects from sendto/sendmsg without the hook Landlock's port rules sit
// on. The filter reads the low 32 bits of each argument: socket(2) takes
// ints, so that is what the kernel acts on.
func networkFilter(n manifest.Network) ([]bpf.RawInstruction, error) {
	if nativeAudit == 0 {
		return nil, fmt.Errorf("the network filter is not implemented for %s", runtime.GOARCH)
	}
	var protos []uint32
	for _, name := range n.Netlink {
		p, ok := netlinkProtocols[name]
		if !ok {
			return nil, fmt.Errorf("network.netlink: unknown protocol %q", name)
		}
		protos = append(protos, p)
	}
	inet, udp := n.Inet != nil, n.Inet != nil && n.Inet.UDP

	a := newAsm()
	a.Load(offArch)
	a.Jeq(nativeAudit, "", "enosys")
	a.Load(offNr)
	if x32SyscallBit != 0 {
		a.Jset(x32SyscallBit, "enosys", "")
	}
	a.Jeq(unix.SYS_SOCKET, "socket", "")
	a.Jeq(unix.SYS_SOCKETPAIR, "socketpair", "")
	a.Jeq(unix.SYS_IO_URING_SETUP, "deny", "")
	a.Jeq(unix.SYS_IO_URING_ENTER, "deny", "")
	a.Jeq(unix.SYS_IO_URING_REGISTER, "deny", "")
	if !connects(n) {
		a.Jeq(unix.SYS_CONNECT, "deny", "")
	}
	if inet {
		a.Jeq(unix.SYS_SENDTO, "flags_arg3", "")
		a.Jeq(unix.SYS_SENDMMSG, "flags_arg3", "")
		a.Jeq(unix.SYS_SENDMSG, "flags_arg2", "")
	}
	a.Jmp("allow")
	if inet {
		a.Label("flags_arg3")
		a.Load(offArg(3))
		a.Jset(unix.MSG_FASTOPEN, "deny", "allow")
		a.Label("flags_arg2")
		a.Load(offArg(2))
		a.Jset(unix.MSG_FASTOPEN, "deny", "allow")
	}

	a.Label("socketpair")
	a.Load(offArg(0))
	a.Jeq(unix.AF_UNIX, "unix_type", "deny")

	a.Label("socket")
	a.Load(offArg(0))
	a.Jeq(unix.AF_UNIX, "unix_type", "")
	a.Jeq(unix.AF_NETLINK, "netlink", "")
	if inet {
		a.Jeq(unix.AF_INET, "inet", "")
		a.Jeq(unix.AF_INET6, "inet", "")
	}
	a.Jmp("deny")

	a.Label("unix_type")
	loadSocketType(a)
	a.Jeq(unix.SOCK_STREAM, "allow", "")
	a.Jeq(unix.SOCK_SEQPACKET, "allow", "deny")

	a.Label("netlink")
	a.Load(offArg(2))
	for _, p := range protos {
		a.Jeq(p, "allow", "")
	}
	a.Jmp("deny")

	if inet {
		a.Label("inet")
		loadSocketType(a)
		if udp {
			a.Jeq(unix.SOCK_DGRAM, "udp", "")
		}
		a.Jeq(unix.SOCK_STREAM, "", "deny")
		a.Load(offArg(2)) // never IPPROTO_MPTCP, SCTP, ...: Landlock does not see them
		a.Jeq(0, "allow", "")
		a.Jeq(unix.IPPROTO_TCP, "allow", "deny")
		if udp {
			a.Label("udp")
			a.Load(offArg(2)) // not ICMP (ping sockets) or UDP-Lite
			a.Jeq(0, "allow", "")
			a.Jeq(unix.IPPROTO_UDP, "allow", "deny")
		}
	}

	a.Label("allow")
	a.Ret(unix.SECCOMP_RET_ALLOW)
	a.Label("deny")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.Label("enosys")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	return a.Assemble()
}

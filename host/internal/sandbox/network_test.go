package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Every netlink protocol a manifest may name has its number here.
func TestNetlinkProtocolsKnown(t *testing.T) {
	for _, name := range manifest.NetlinkProtocols {
		if _, ok := netlinkProtocols[name]; !ok {
			t.Errorf("manifest allows netlink %q, the filter does not know it", name)
		}
	}
}

// The filter, loaded by the kernel in a child process (a seccomp filter
// cannot be removed): each case names the grant, the calls and the errno
// each must end with (0: allowed).
func TestNetworkFilter(t *testing.T) {
	type call struct {
		name string
		do   func() error
		want unix.Errno
	}
	sock := func(fam, typ, proto int) func() error {
		return func() error {
			fd, err := unix.Socket(fam, typ|unix.SOCK_CLOEXEC, proto)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
	}
	// high sets bits the kernel ignores (it takes ints): the filter must
	// ignore them too, or a plugin could pass them to slip by.
	high := func(fam, typ, proto uint64) func() error {
		return func() error {
			fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(fam|1<<32), uintptr(typ|1<<32), uintptr(proto|1<<32))
			if e != 0 {
				return e
			}
			unix.Close(int(fd))
			return nil
		}
	}
	pair := func(typ int) func() error {
		return func() error {
			fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}
	}
	connect := func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrUnix{Name: "/nonexistent/socket"})
	}
	fastOpen := func(flagArg bool) func() error {
		return func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			// port 9 on loopback: nothing listens, so an allowed call fails
			// with ECONNREFUSED, never EPERM
			to := &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}
			if flagArg {
				return unix.Sendto(fd, []byte("x"), unix.MSG_FASTOPEN, to)
			}
			_, err = unix.SendmsgN(fd, []byte("x"), nil, to, unix.MSG_FASTOPEN)
			return err
		}
	}
	ioUring := func() error {
		var params [120]byte // struct io_uring_params
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if e != 0 {
			return e
		}
		unix.Close(int(fd))
		return nil
	}
	cases := map[string]struct {
		grant manifest.Network
		calls []call
	}{
		"none": {manifest.Network{}, []call{
			{"unix stream (go-plugin's listener)", sock(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0), 0},
			{"unix seqpacket", sock(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0), 0},
			{"unix dgram", sock(unix.AF_UNIX, unix.SOCK_DGRAM, 0), unix.EPERM},
			{"socketpair stream", pair(unix.SOCK_STREAM), 0},
			{"socketpair dgram", pair(unix.SOCK_DGRAM), unix.EPERM},
			{"connect", connect, unix.EPERM},
			{"tcp", sock(unix.AF_INET, unix.SOCK_STREAM, 0), unix.EPERM},
			{"tcp, high bits", high(unix.AF_INET, unix.SOCK_STREAM, 0), unix.EPERM},
			{"mptcp", sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), unix.EPERM},
			{"udp", sock(unix.AF_INET, unix.SOCK_DGRAM, 0), unix.EPERM},
			{"tcp6", sock(unix.AF_INET6, unix.SOCK_STREAM, 0), unix.EPERM},
			{"packet", sock(unix.AF_PACKET, unix.SOCK_RAW, 0), unix.EPERM},
			{"vsock", sock(unix.AF_VSOCK, unix.SOCK_STREAM, 0), unix.EPERM},
			{"netlink route", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE), unix.EPERM},
			{"netlink generic", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC), unix.EPERM},
			{"io_uring_setup", ioUring, unix.EPERM},
		}},
		"netlink": {manifest.Network{Netlink: []string{"route", "generic"}}, []call{
			{"netlink route", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE), 0},
			{"netlink generic", sock(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_GENERIC), 0},
			{"netlink generic, high bits", high(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC), 0},
			{"netlink uevent", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT), unix.EPERM},
			{"netlink sock_diag", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG), unix.EPERM},
			{"connect", connect, unix.EPERM},
			{"udp", sock(unix.AF_INET, unix.SOCK_DGRAM, 0), unix.EPERM},
		}},
		"unix": {manifest.Network{Unix: []string{"/run/x.sock"}}, []call{
			{"connect", connect, unix.ENOENT}, // allowed by the filter (Landlock holds it to the path)
			{"tcp", sock(unix.AF_INET, unix.SOCK_STREAM, 0), unix.EPERM},
			{"unix dgram", sock(unix.AF_UNIX, unix.SOCK_DGRAM, 0), unix.EPERM},
		}},
		"tcp bind only": {manifest.Network{Inet: &manifest.Inet{TCPBind: []uint16{81}}}, []call{
			{"tcp", sock(unix.AF_INET, unix.SOCK_STREAM, 0), 0},
			{"connect", connect, unix.EPERM}, // a server needs none
		}},
		"inet": {manifest.Network{Inet: &manifest.Inet{TCPConnect: []uint16{9}}}, []call{
			{"tcp", sock(unix.AF_INET, unix.SOCK_STREAM, 0), 0},
			{"tcp6, explicit protocol", sock(unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP), 0},
			{"mptcp", sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), unix.EPERM},
			{"sctp", sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP), unix.EPERM},
			{"udp", sock(unix.AF_INET, unix.SOCK_DGRAM, 0), unix.EPERM},
			{"icmp", sock(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), unix.EPERM},
			{"raw", sock(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP), unix.EPERM},
			{"TCP Fast Open, sendto", fastOpen(true), unix.EPERM},
			{"TCP Fast Open, sendmsg", fastOpen(false), unix.EPERM},
			{"connect", connect, unix.ENOENT},
		}},
		"inet+udp": {manifest.Network{Inet: &manifest.Inet{UDP: true}}, []call{
			{"udp", sock(unix.AF_INET, unix.SOCK_DGRAM, 0), 0},
			{"udp6, explicit protocol", sock(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP), 0},
			{"udplite", sock(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDPLITE), unix.EPERM},
			{"connect", connect, unix.ENOENT},
		}},
	}
	if name := os.Getenv("SANDBOX_FILTER_CASE"); name != "" {
		c := cases[name]
		runtime.LockOSThread() // the filter is this thread's
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := installFilter(c.grant, 0); err != nil {
			t.Fatal(err)
		}
		for _, cl := range c.calls {
			var got unix.Errno
			if err := cl.do(); err != nil && !errors.As(err, &got) {
				t.Errorf("%s: %v", cl.name, err)
				continue
			}
			if got != cl.want {
				t.Errorf("%s: errno %d (%v), want %d (%v)", cl.name, got, got, cl.want, cl.want)
			}
		}
		return
	}
	for name := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNetworkFilter$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SANDBOX_FILTER_CASE="+name)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}

// What the kernel cannot check from a native process: calls of another
// audit arch (i386's int 0x80, 32-bit Arm) or x32 get ENOSYS before any
// rule is looked at, run through the program in a BPF VM.
func TestNetworkFilterForeignCalls(t *testing.T) {
	raw, err := networkFilter(manifest.Network{Netlink: []string{"route"}, Inet: &manifest.Inet{UDP: true}})
	if err != nil {
		t.Fatal(err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the program does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	run := func(arch, nr uint32) uint32 {
		// struct seccomp_data; the kernel loads its words in host order,
		// the VM big-endian, so each word is written big-endian here.
		data := make([]byte, 64)
		put := func(off uint32, v uint32) { binary.BigEndian.PutUint32(data[off:], v) }
		put(offNr, nr)
		put(offArch, arch)
		put(offArg(0), unix.AF_INET)
		put(offArg(1), unix.SOCK_DGRAM)
		out, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(out)
	}
	allow, enosys := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	if got := run(nativeAudit, unix.SYS_SOCKET); got != allow {
		t.Errorf("native socket(AF_INET, SOCK_DGRAM) with udp granted: %#x, want allow", got)
	}
	for _, arch := range []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_AARCH64} {
		if arch == nativeAudit {
			continue
		}
		if got := run(arch, unix.SYS_GETPID); got != enosys {
			t.Errorf("audit arch %#x: %#x, want ENOSYS", arch, got)
		}
	}
	if x32SyscallBit != 0 {
		if got := run(nativeAudit, x32SyscallBit|unix.SYS_SOCKET); got != enosys {
			t.Errorf("x32 socket: %#x, want ENOSYS", got)
		}
	}
}

func TestCheckNetwork(t *testing.T) {
	unixGrant := manifest.Network{Unix: []string{"/run/x.sock"}}
	tcp := manifest.Network{Inet: &manifest.Inet{TCPConnect: []uint16{443}}}
	cases := []struct {
		name  string
		n     manifest.Network
		abi   int
		h     Host
		err   []string // all in the refusal; nil: accepted
		warns bool
	}{
		{"no grant on an old kernel", manifest.Network{}, 1, Host{}, nil, false},
		{"netlink", manifest.Network{Netlink: []string{"rdma"}}, 1, Host{}, nil, false},
		{"inet without TCP rules", tcp, 3, Host{AllowAnyUnixConnect: true}, []string{`plugin "x"`, "network.inet", "ABI 4", "ABI 3"}, false},
		{"unix below ABI 9", unixGrant, 7, Host{}, []string{`plugin "x"`, "network.unix [/run/x.sock]", "ABI 9", "ABI 7", "--plugin.allow-any-unix-connect"}, false},
		{"tcp_connect below ABI 9", tcp, 8, Host{}, []string{"network.inet.tcp_connect [443]", "--plugin.allow-any-unix-connect"}, false},
		{"udp below ABI 9", manifest.Network{Inet: &manifest.Inet{UDP: true}}, 8, Host{}, []string{"network.inet.udp"}, false},
		{"tcp_bind needs no connect", manifest.Network{Inet: &manifest.Inet{TCPBind: []uint16{81}}}, 4, Host{}, nil, false},
		{"unix below ABI 9, accepted", unixGrant, 7, Host{AllowAnyUnixConnect: true}, nil, true},
		{"unix on ABI 9", unixGrant, 9, Host{}, nil, false},
	}
	for _, c := range cases {
		warnings, err := checkNetwork("x", c.n, c.abi, c.h)
		switch {
		case c.err == nil && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.err != nil && err == nil:
			t.Errorf("%s: accepted, want a refusal", c.name)
		case err != nil:
			for _, s := range c.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %q does not say %q", c.name, err, s)
				}
			}
		}
		if got := slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "every unix socket") }); got != c.warns {
			t.Errorf("%s: warnings %q", c.name, warnings)
		}
	}
}

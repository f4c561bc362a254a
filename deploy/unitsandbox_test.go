package deploy

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// unitSandboxArg makes the test binary the stand-in for systemd's service
// setup (TestMain): it applies the unit's file-system restrictions to a
// new mount namespace and execs the rest of its arguments (setpriv, which
// applies the capability bounding set and no_new_privs, then the host).
const unitSandboxArg = "__plexporter-unit-sandbox"

// unitSandbox is what ProtectSystem=strict, ProtectHome=read-only,
// ProtectKernelTunables=yes, PrivateTmp=yes and RuntimeDirectory=plexporter
// amount to for the host: every mount read-only but /dev, a private /tmp
// and /var/tmp, and a writable /run/plexporter (mode 0755). With a first
// argument "--seccomp=<spec>" (seccompSpec) it also installs the filter
// that SystemCallFilter=, SystemCallErrorNumber=, SystemCallArchitectures=
// and RestrictAddressFamilies= make. It never returns.
func unitSandbox(args []string) {
	runtime.LockOSThread() // the namespace and the filter are this thread's; it execs
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "unit sandbox: %s: %v\n", what, err)
		os.Exit(125)
	}
	var filter []bpf.RawInstruction
	if len(args) > 0 && strings.HasPrefix(args[0], "--seccomp=") {
		var err error
		if filter, err = seccompFilter(strings.TrimPrefix(args[0], "--seccomp=")); err != nil {
			fail("seccomp filter", err)
		}
		args = args[1:]
	}
	if len(args) == 0 {
		fail("usage", fmt.Errorf("%s [--seccomp=spec] <command> [args]", unitSandboxArg))
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		fail("unshare mount namespace", err)
	}
	// Slave, as systemd does: mounts made on the host later still appear.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		fail("make / a slave", err)
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, ro); err != nil {
		fail("read-only /", err)
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(-1, "/dev", unix.AT_RECURSIVE, rw); err != nil {
		fail("writable /dev", err)
	}
	for dir, opts := range map[string]string{"/tmp": "mode=1777", "/var/tmp": "mode=1777", "/run/plexporter": "mode=0755"} {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			fail("tmpfs on "+dir, err)
		}
	}
	if filter != nil {
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: (*unix.SockFilter)(unsafe.Pointer(&filter[0]))}
		if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
			fail("install seccomp filter", err)
		}
	}
	err := syscall.Exec(args[0], args, os.Environ())
	fail("exec "+args[0], err)
}

// seccompSpec encodes the unit's system call restrictions for the helper:
// "<allowed syscall numbers>;<allowed socket families>;<errno>;<denied
// CLONE_NEW* flags>", each list comma-separated.
func seccompSpec(allowed []uint32, families []uint32, errno uint32, deniedNamespaces uint32) string {
	join := func(v []uint32) string {
		var s []string
		for _, n := range v {
			s = append(s, strconv.FormatUint(uint64(n), 10))
		}
		return strings.Join(s, ",")
	}
	return join(allowed) + ";" + join(families) + ";" + strconv.FormatUint(uint64(errno), 10) + ";" + strconv.FormatUint(uint64(deniedNamespaces), 10)
}

// seccompFilter assembles the classic BPF program systemd's directives
// amount to: a foreign architecture (or x32) is killed; RestrictNamespaces=
// makes unshare(2) and clone(2) with a denied CLONE_NEW* flag fail with
// EPERM and clone3(2) (whose flags a filter cannot read) with ENOSYS, so
// that callers fall back to clone(2); socket(2) with a family not allowed
// fails with EAFNOSUPPORT; an allowed system call runs, any other fails
// with errno.
func seccompFilter(spec string) ([]bpf.RawInstruction, error) {
	parts := strings.Split(spec, ";")
	if len(parts) != 4 {
		return nil, fmt.Errorf("bad spec %q", spec)
	}
	parse := func(s string) ([]uint32, error) {
		var out []uint32
		for _, f := range strings.Split(s, ",") {
			if f == "" {
				continue
			}
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil, err
			}
			out = append(out, uint32(n))
		}
		return out, nil
	}
	allowed, err := parse(parts[0])
	if err != nil {
		return nil, err
	}
	families, err := parse(parts[1])
	if err != nil {
		return nil, err
	}
	errno, err := strconv.ParseUint(parts[2], 10, 16)
	if err != nil {
		return nil, err
	}
	deniedNS, err := strconv.ParseUint(parts[3], 10, 32)
	if err != nil {
		return nil, err
	}
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no seccomp architecture for %s", runtime.GOARCH)
	}
	const (
		offNr, offArch, offArg0 = 0, 4, 16
		x32Bit                  = 0x40000000
	)
	ret := func(v uint32) bpf.Instruction { return bpf.RetConstant{Val: v} }
	allow := ret(unix.SECCOMP_RET_ALLOW)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		ret(unix.SECCOMP_RET_KILL_PROCESS),
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1}, ret(unix.SECCOMP_RET_KILL_PROCESS))
	}
	if deniedNS != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_CLONE3), SkipFalse: 1},
			ret(unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)),
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_UNSHARE), SkipTrue: 1},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_CLONE), SkipFalse: 4},
			bpf.LoadAbsolute{Off: offArg0, Size: 4}, // the flags of both
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: uint32(deniedNS), SkipFalse: 1},
			ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)),
			bpf.LoadAbsolute{Off: offNr, Size: 4},
		)
	}
	// socket(2): its family (the first argument's low 32 bits) decides.
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_SOCKET), SkipFalse: uint8(2*len(families) + 2)},
		bpf.LoadAbsolute{Off: offArg0, Size: 4})
	for _, f := range families {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: f, SkipFalse: 1}, allow)
	}
	prog = append(prog, ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT)))
	for _, nr := range allowed {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, allow)
	}
	prog = append(prog, ret(unix.SECCOMP_RET_ERRNO|uint32(errno)))
	return bpf.Assemble(prog)
}

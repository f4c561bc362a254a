package sandbox

import (
	"golang.org/x/net/bpf"

	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/internal/seccomp"
)

// The filters are assembled and loaded by internal/seccomp, which the
// privileged plugins' own filters share; these are its names here.
const (
	offNr         = seccomp.OffNr
	offArch       = seccomp.OffArch
	nativeAudit   = seccomp.NativeAudit
	x32SyscallBit = seccomp.X32SyscallBit
)

func offArg(i uint32) uint32 { return seccomp.OffArg(i) }

func newAsm() *seccomp.Asm { return seccomp.NewAsm() }

// loadSocketType loads socket(2)'s type without SOCK_NONBLOCK/SOCK_CLOEXEC
// (the kernel's SOCK_TYPE_MASK; it refuses any other flag).
func loadSocketType(a *seccomp.Asm) {
	a.Load(offArg(1))
	a.Emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf})
}

// installFilter loads the seccomp program for the grant n. no_new_privs
// must be set. Without flags the filter confines the calling thread only
// (like landlock_restrict_self: call it on the locked thread that execs,
// and the exec'd program and all it starts inherit it); with
// SECCOMP_FILTER_FLAG_TSYNC every thread of the process.
func installFilter(n manifest.Network, flags uintptr) error {
	raw, err := networkFilter(n)
	if err != nil {
		return err
	}
	return loadFilter("network", raw, flags)
}

// loadFilter loads a seccomp program (named what in errors) as
// installFilter says; programs stack, and the most restrictive answer wins.
func loadFilter(what string, raw []bpf.RawInstruction, flags uintptr) error {
	return seccomp.Install(what, raw, flags)
}

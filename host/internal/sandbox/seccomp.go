package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Offsets into struct seccomp_data, the input of a seccomp program. The
// arguments are 64-bit; on the little-endian machines the filter supports
// (see nativeAudit) their low 32 bits come first.
const (
	offNr   = 0
	offArch = 4
)

func offArg(i uint32) uint32 { return 16 + 8*i }

// asm assembles a classic BPF program with named forward jump targets, so
// that the filter reads as its decision table does.
type asm struct {
	prog   []bpf.Instruction
	labels map[string]int
	jumps  []jump
}

// jump is a jump instruction whose targets are resolved at assemble time;
// "" is the next instruction.
type jump struct {
	at          int
	true, false string
}

func newAsm() *asm { return &asm{labels: map[string]int{}} }

func (a *asm) label(name string)      { a.labels[name] = len(a.prog) }
func (a *asm) load(off uint32)        { a.emit(bpf.LoadAbsolute{Off: off, Size: 4}) }
func (a *asm) ret(action uint32)      { a.emit(bpf.RetConstant{Val: action}) }
func (a *asm) jmp(to string)          { a.jump(bpf.Jump{}, to, "") }
func (a *asm) emit(i bpf.Instruction) { a.prog = append(a.prog, i) }

// loadSocketType loads socket(2)'s type without SOCK_NONBLOCK/SOCK_CLOEXEC
// (the kernel's SOCK_TYPE_MASK; it refuses any other flag).
func (a *asm) loadSocketType() {
	a.load(offArg(1))
	a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf})
}

// jeq goes to t if A == v, else to f.
func (a *asm) jeq(v uint32, t, f string) { a.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: v}, t, f) }

// jset goes to t if A&v != 0, else to f.
func (a *asm) jset(v uint32, t, f string) { a.jump(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: v}, t, f) }

func (a *asm) jump(i bpf.Instruction, t, f string) {
	a.jumps = append(a.jumps, jump{at: len(a.prog), true: t, false: f})
	a.emit(i)
}

func (a *asm) assemble() ([]bpf.RawInstruction, error) {
	skip := func(from int, name string) (uint32, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		if !ok || to <= from {
			return 0, fmt.Errorf("seccomp program: no label %q after instruction %d", name, from)
		}
		return uint32(to - from - 1), nil
	}
	for _, j := range a.jumps {
		t, err := skip(j.at, j.true)
		if err != nil {
			return nil, err
		}
		f, err := skip(j.at, j.false)
		if err != nil {
			return nil, err
		}
		switch i := a.prog[j.at].(type) {
		case bpf.JumpIf:
			if t > 255 || f > 255 {
				return nil, fmt.Errorf("seccomp program: jump from instruction %d too long", j.at)
			}
			i.SkipTrue, i.SkipFalse = uint8(t), uint8(f)
			a.prog[j.at] = i
		case bpf.Jump:
			i.Skip = t
			a.prog[j.at] = i
		}
	}
	return bpf.Assemble(a.prog)
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
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	// With TSYNC, a thread that cannot take the filter is returned as a
	// positive thread id, not as an errno.
	tid, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	switch {
	case e != 0:
		return fmt.Errorf("seccomp %s filter: %w", what, e)
	case tid != 0:
		return fmt.Errorf("seccomp %s filter: thread %d could not be synchronised", what, tid)
	}
	return nil
}

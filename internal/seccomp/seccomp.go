//go:build linux

// Package seccomp assembles and installs seccomp filters: the host's
// sandbox (host/internal/sandbox) builds its filters with it, and so do the
// privileged plugins that confine themselves further once set up (ebpf
// after loading its programs, nvme before serving).
package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data, the input of a seccomp program. The
// arguments are 64-bit; on the little-endian machines the filters support
// (see NativeAudit) their low 32 bits come first.
const (
	OffNr   = 0
	OffArch = 4
)

// OffArg is the offset of argument i's low 32 bits.
func OffArg(i uint32) uint32 { return 16 + 8*i }

// OffArgHigh is the offset of argument i's high 32 bits.
func OffArgHigh(i uint32) uint32 { return OffArg(i) + 4 }

// Asm assembles a classic BPF program with named forward jump targets, so
// that a filter reads as its decision table does.
type Asm struct {
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

func NewAsm() *Asm { return &Asm{labels: map[string]int{}} }

// Label names the next instruction.
func (a *Asm) Label(name string) { a.labels[name] = len(a.prog) }

// Load loads the 32-bit word at off of struct seccomp_data into A.
func (a *Asm) Load(off uint32) { a.Emit(bpf.LoadAbsolute{Off: off, Size: 4}) }

// Ret returns action (SECCOMP_RET_*).
func (a *Asm) Ret(action uint32) { a.Emit(bpf.RetConstant{Val: action}) }

// Jmp goes to the label to.
func (a *Asm) Jmp(to string) { a.jump(bpf.Jump{}, to, "") }

// Emit appends any instruction.
func (a *Asm) Emit(i bpf.Instruction) { a.prog = append(a.prog, i) }

// Jeq goes to t if A == v, else to f.
func (a *Asm) Jeq(v uint32, t, f string) { a.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: v}, t, f) }

// Jset goes to t if A&v != 0, else to f.
func (a *Asm) Jset(v uint32, t, f string) { a.jump(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: v}, t, f) }

func (a *Asm) jump(i bpf.Instruction, t, f string) {
	a.jumps = append(a.jumps, jump{at: len(a.prog), true: t, false: f})
	a.Emit(i)
}

// Assemble resolves the labels and returns the program.
func (a *Asm) Assemble() ([]bpf.RawInstruction, error) {
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

// Install loads a seccomp program (named what in errors). no_new_privs
// must be set, or the caller have CAP_SYS_ADMIN. Without flags the filter
// confines the calling thread only (like landlock_restrict_self: call it
// on the locked thread that execs, and the exec'd program and all it
// starts inherit it); with SECCOMP_FILTER_FLAG_TSYNC every thread of the
// process. Programs stack, and the most restrictive answer wins.
func Install(what string, raw []bpf.RawInstruction, flags uintptr) error {
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

// InstallProcess sets no_new_privs and installs raw on every thread of the
// calling process (SECCOMP_FILTER_FLAG_TSYNC): what a Go program confining
// itself needs, since the runtime runs goroutines on any of its threads.
// The kernel gives the other threads no_new_privs with the filter.
func InstallProcess(what string, raw []bpf.RawInstruction) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp %s filter: set no_new_privs: %w", what, err)
	}
	return Install(what, raw, unix.SECCOMP_FILTER_FLAG_TSYNC)
}

// Eval runs raw in a BPF VM on the call nr of arch with args, as the
// kernel would, and returns its action: the tests' way to check a filter's
// decision table without installing it. The VM reads words big-endian, so
// struct seccomp_data is laid out that way for it, each argument's low 32
// bits first as on the little-endian machines the filters support.
func Eval(raw []bpf.RawInstruction, arch, nr uint32, args ...uint64) (uint32, error) {
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		return 0, fmt.Errorf("seccomp program does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		return 0, err
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[OffNr:], nr)
	binary.BigEndian.PutUint32(data[OffArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[OffArg(uint32(i)):], uint32(a))
		binary.BigEndian.PutUint32(data[OffArgHigh(uint32(i)):], uint32(a>>32))
	}
	out, err := vm.Run(data)
	return uint32(out), err
}

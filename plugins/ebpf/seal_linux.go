package main

import (
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/internal/seccomp"
)

// Once its programs are loaded and attached the plugin only reads and
// writes their maps; with CAP_BPF and CAP_PERFMON it could still load any
// tracing program (read another process's memory with
// bpf_probe_read_user, kill it with bpf_send_signal). sealProgramLoads
// takes that away for the rest of the process's life: a seccomp filter on
// every thread allows bpf(2) only with the commands the collects and the
// refreshes make, and denies perf_event_open(2):
//
//	not the native audit arch, x32          -> ENOSYS
//	bpf(MAP_CREATE, MAP_LOOKUP_ELEM,
//	    MAP_UPDATE_ELEM, MAP_DELETE_ELEM,
//	    MAP_GET_NEXT_KEY, OBJ_GET_INFO_BY_FD,
//	    MAP_LOOKUP_AND_DELETE_ELEM, MAP_FREEZE,
//	    MAP_*_BATCH)                        -> allow
//	bpf(any other command: PROG_LOAD,
//	    BTF_LOAD, LINK_CREATE, PROG_ATTACH,
//	    RAW_TRACEPOINT_OPEN, PROG_RUN, the
//	    *_GET_FD_BY_ID, TOKEN_CREATE, ...)  -> EPERM
//	perf_event_open                         -> EPERM
//	everything else                         -> allow
//
// An allowlist of commands, so that a command a later kernel adds is
// denied too. MAP_CREATE stays: a map is reachable only by programs, and
// the library may create one to probe a feature. The filter reads bpf(2)'s
// command as the kernel does, an int: the low 32 bits.
var sealedBPFCommands = []uint32{
	unix.BPF_MAP_CREATE,
	unix.BPF_MAP_LOOKUP_ELEM, unix.BPF_MAP_UPDATE_ELEM, unix.BPF_MAP_DELETE_ELEM,
	unix.BPF_MAP_GET_NEXT_KEY, unix.BPF_OBJ_GET_INFO_BY_FD,
	unix.BPF_MAP_LOOKUP_AND_DELETE_ELEM, unix.BPF_MAP_FREEZE,
	unix.BPF_MAP_LOOKUP_BATCH, unix.BPF_MAP_LOOKUP_AND_DELETE_BATCH,
	unix.BPF_MAP_UPDATE_BATCH, unix.BPF_MAP_DELETE_BATCH,
}

// sealFilter is the program above.
func sealFilter() ([]bpf.RawInstruction, error) {
	if seccomp.NativeAudit == 0 {
		return nil, fmt.Errorf("the seccomp filter is not written for %s", runtime.GOARCH)
	}
	a := seccomp.NewAsm()
	a.Load(seccomp.OffArch)
	a.Jeq(seccomp.NativeAudit, "", "enosys")
	a.Load(seccomp.OffNr)
	if seccomp.X32SyscallBit != 0 {
		a.Jset(seccomp.X32SyscallBit, "enosys", "")
	}
	a.Jeq(unix.SYS_BPF, "bpf", "")
	a.Jeq(unix.SYS_PERF_EVENT_OPEN, "deny", "allow")
	a.Label("bpf")
	a.Load(seccomp.OffArg(0))
	for _, cmd := range sealedBPFCommands {
		a.Jeq(cmd, "allow", "")
	}
	a.Jmp("deny")
	a.Label("allow")
	a.Ret(unix.SECCOMP_RET_ALLOW)
	a.Label("deny")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.Label("enosys")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	return a.Assemble()
}

// sealProgramLoads installs sealFilter on every thread of the process.
func sealProgramLoads() error {
	raw, err := sealFilter()
	if err != nil {
		return err
	}
	return seccomp.InstallProcess("program loading", raw)
}

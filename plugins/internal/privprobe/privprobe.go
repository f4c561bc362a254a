//go:build linux

// Package privprobe tries, from inside a plugin's process, what a
// compromised privileged plugin would: load a tracing program that calls
// bpf_send_signal or bpf_probe_read_user, open a perf event, mount, make an
// ioctl other than the plugin's own. Only test builds of the plugins
// (build tag sealprobe) import it; the host's tests read the answers as
// metrics and assert that the shipped restrictions deny each, and that each
// is denied by them, not by something else, with the restriction off.
package privprobe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Attempts are the names Try answers for.
var Attempts = []string{"bpf_send_signal", "bpf_probe_read_user", "perf_event_open", "mount", "ioctl_fionread"}

// Try makes every attempt and returns its errno, 0 for success (whatever it
// made is closed again). A program is loaded, never attached: loading is
// what the seal must stop, and an attached bpf_send_signal would kill.
func Try() map[string]float64 {
	out := map[string]float64{}
	out["bpf_send_signal"] = errno(load(asm.Instructions{
		asm.Mov.Imm(asm.R1, int32(unix.SIGKILL)),
		asm.FnSendSignal.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}))
	out["bpf_probe_read_user"] = errno(load(asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 8),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnProbeReadUser.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}))
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	out["perf_event_open"] = errno(err)
	// A target that does not exist: without the filter the kernel looks
	// it up first and answers ENOENT, so nothing is ever mounted.
	out["mount"] = errno(unix.Mount("none", "/nonexistent-plexporter-privprobe", "tmpfs", 0, ""))
	r, w, err := os.Pipe()
	if err == nil {
		_, err = unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ) // FIONREAD
		r.Close()
		w.Close()
	}
	out["ioctl_fionread"] = errno(err)
	return out
}

// progLoadAttr is union bpf_attr's BPF_PROG_LOAD part, up to
// expected_attach_type; the kernel reads what follows as 0.
type progLoadAttr struct {
	progType, insnCnt  uint32
	insns, license     uint64
	logLevel, logSize  uint32
	logBuf             uint64
	kernVersion, flags uint32
	name               [16]byte
	ifindex, attachTyp uint32
}

// load makes the bpf(BPF_PROG_LOAD) call itself, for a raw tracepoint
// program: no library step before it (reading kernel types, probing
// features) can fail first, so its errno is the call's.
func load(insns asm.Instructions) error {
	var code bytes.Buffer
	if err := insns.Marshal(&code, binary.LittleEndian); err != nil {
		return err
	}
	license := []byte("GPL\x00")
	attr := progLoadAttr{
		progType: unix.BPF_PROG_TYPE_RAW_TRACEPOINT,
		insnCnt:  uint32(code.Len() / asm.InstructionSize),
		insns:    uint64(uintptr(unsafe.Pointer(&code.Bytes()[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
	}
	fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(code.Bytes())
	runtime.KeepAlive(license)
	if e != 0 {
		return e
	}
	unix.Close(int(fd))
	return nil
}

// errno is err's errno, 0 for nil, -1 for an error without one.
func errno(err error) float64 {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return float64(e)
	}
	return -1
}

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The host PID namespace's filter, run in a BPF VM: each call that may
// change another process is refused unless it names the caller, whatever
// the high bits of the argument say (the kernel reads ints).
func TestHostPIDFilter(t *testing.T) {
	raw, err := hostPIDFilter()
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
	run := func(arch, nr uint32, args ...uint64) uint32 {
		data := make([]byte, 64) // struct seccomp_data, big-endian words for the VM (see TestNetworkFilterForeignCalls)
		binary.BigEndian.PutUint32(data[offNr:], nr)
		binary.BigEndian.PutUint32(data[offArch:], arch)
		for i, a := range args {
			binary.BigEndian.PutUint32(data[offArg(uint32(i)):], uint32(a))
			binary.BigEndian.PutUint32(data[offArg(uint32(i))+4:], uint32(a>>32))
		}
		out, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(out)
	}
	allow, eperm := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	const other, highBits = 4242, 1 << 32
	cases := []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"prlimit64 self", unix.SYS_PRLIMIT64, []uint64{0}, allow},
		{"prlimit64 self, high bits", unix.SYS_PRLIMIT64, []uint64{highBits}, allow},
		{"prlimit64 other", unix.SYS_PRLIMIT64, []uint64{other}, eperm},
		{"prlimit64 other, high bits", unix.SYS_PRLIMIT64, []uint64{other | highBits}, eperm},
		{"sched_setaffinity self", unix.SYS_SCHED_SETAFFINITY, []uint64{0}, allow},
		{"sched_setaffinity other", unix.SYS_SCHED_SETAFFINITY, []uint64{other}, eperm},
		{"sched_setscheduler other", unix.SYS_SCHED_SETSCHEDULER, []uint64{other}, eperm},
		{"sched_setparam other", unix.SYS_SCHED_SETPARAM, []uint64{other}, eperm},
		{"sched_setattr other", unix.SYS_SCHED_SETATTR, []uint64{other}, eperm},
		{"sched_setattr self", unix.SYS_SCHED_SETATTR, []uint64{0}, allow},
		{"setpriority process self", unix.SYS_SETPRIORITY, []uint64{unix.PRIO_PROCESS, 0}, allow},
		{"setpriority process other", unix.SYS_SETPRIORITY, []uint64{unix.PRIO_PROCESS, other}, eperm},
		{"setpriority own process group", unix.SYS_SETPRIORITY, []uint64{unix.PRIO_PGRP, 0}, eperm},
		{"setpriority own user", unix.SYS_SETPRIORITY, []uint64{unix.PRIO_USER, 0}, eperm},
		{"ioprio_set process self", unix.SYS_IOPRIO_SET, []uint64{1, 0}, allow},
		{"ioprio_set process other", unix.SYS_IOPRIO_SET, []uint64{1, other}, eperm},
		{"ioprio_set own user", unix.SYS_IOPRIO_SET, []uint64{3, 0}, eperm},
		{"getpid", unix.SYS_GETPID, nil, allow},
		{"kill other (Landlock's)", unix.SYS_KILL, []uint64{other, 0}, allow},
	}
	for _, c := range cases {
		if got := run(nativeAudit, c.nr, c.args...); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

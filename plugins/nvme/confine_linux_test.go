package main

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/internal/seccomp"
)

// The filter's decision table, run in a BPF VM (the real process under the
// shipped manifest: host/privileged_seal_test.go, TestNVMeConfined): the
// admin command passes, every other ioctl and the calls CAP_SYS_ADMIN would
// otherwise open up are refused, whatever the high bits say.
func TestConfineFilter(t *testing.T) {
	raw, err := confineFilter()
	if err != nil {
		t.Fatal(err)
	}
	allow, eperm, enosys := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	const highBits = 1 << 32
	cases := []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"ioctl admin command", unix.SYS_IOCTL, []uint64{3, nvmeAdminCmdIoctl}, allow},
		{"ioctl admin command, high bits", unix.SYS_IOCTL, []uint64{3, nvmeAdminCmdIoctl | highBits}, allow},
		{"ioctl NVME_IOCTL_IO_CMD", unix.SYS_IOCTL, []uint64{3, 0xC0484E43}, eperm},
		{"ioctl NVME_IOCTL_RESET", unix.SYS_IOCTL, []uint64{3, 0x4E44}, eperm},
		{"ioctl FIONREAD", unix.SYS_IOCTL, []uint64{3, unix.TIOCINQ}, eperm},
		{"bpf", unix.SYS_BPF, []uint64{unix.BPF_PROG_LOAD}, eperm},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, nil, eperm},
		{"mount", unix.SYS_MOUNT, nil, eperm},
		{"fsopen", unix.SYS_FSOPEN, nil, eperm},
		{"move_mount", unix.SYS_MOVE_MOUNT, nil, eperm},
		{"keyctl", unix.SYS_KEYCTL, nil, eperm},
		{"setns", unix.SYS_SETNS, nil, eperm},
		{"unshare", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS}, eperm},
		{"syslog", unix.SYS_SYSLOG, nil, eperm},
		{"ptrace", unix.SYS_PTRACE, nil, eperm},
		{"clone a thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD}, allow},
		{"clone a mount namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNS}, eperm},
		{"clone a user namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"clone3", unix.SYS_CLONE3, nil, enosys},
		{"openat", unix.SYS_OPENAT, nil, allow},
		{"read", unix.SYS_READ, nil, allow},
	}
	for _, c := range cases {
		got, err := seccomp.Eval(raw, seccomp.NativeAudit, c.nr, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	if got, _ := seccomp.Eval(raw, seccomp.NativeAudit^1, unix.SYS_IOCTL, 3, nvmeAdminCmdIoctl); got != enosys {
		t.Errorf("ioctl of a foreign arch: %#x, want ENOSYS", got)
	}
}

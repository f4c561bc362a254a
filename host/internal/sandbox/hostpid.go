package sandbox

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A plugin in the host's PID namespace (manifest pid_namespace: host) sees
// every process by pid, the other plugins included (their namespaces are
// below the host's), and the kernel lets a uid change much of what its own
// processes run with. Landlock denies ptrace and (ABI 6) signals outside
// the plugin's domain, but has no hook for scheduling and resource limits:
// measured on 6.18 with ABI 7, such a plugin running as the default plugin
// user could renice, re-pin and lower the rlimits of every other plugin
// (host/pidns_host_test.go). In a private namespace those pids do not
// exist for it. So the launcher stacks this filter on the network filter
// for it: each of these calls may name only the caller itself.
//
//	prlimit64, sched_setaffinity, sched_setscheduler,
//	sched_setparam, sched_setattr         (pid, ...)     -> EPERM unless pid is 0
//	setpriority(which, who, ...)                         -> EPERM unless PRIO_PROCESS, who 0
//	ioprio_set(which, who, ...)                          -> EPERM unless IOPRIO_WHO_PROCESS, who 0
//	everything else                                      -> allow
//
// Reading those values of another process (getpriority, sched_getaffinity,
// prlimit64 without a new limit) is refused alike: the filter cannot tell a
// read from a write in every one of them, and a collector has no business
// with either. The filter reads the low 32 bits of each argument: the pids
// and which values are ints, which is what the kernel acts on. Calls of
// another audit arch are the network filter's (ENOSYS).
func hostPIDFilter() ([]bpf.RawInstruction, error) {
	const ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS, linux/ioprio.h
	a := newAsm()
	a.Load(offArch)
	a.Jeq(nativeAudit, "", "allow")
	a.Load(offNr)
	for _, nr := range []uint32{unix.SYS_PRLIMIT64, unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_SETATTR} {
		a.Jeq(nr, "pid_arg0", "")
	}
	a.Jeq(unix.SYS_SETPRIORITY, "setpriority", "")
	a.Jeq(unix.SYS_IOPRIO_SET, "ioprio_set", "")
	a.Jmp("allow")

	a.Label("setpriority")
	a.Load(offArg(0))
	a.Jeq(unix.PRIO_PROCESS, "who_arg1", "deny")
	a.Label("ioprio_set")
	a.Load(offArg(0))
	a.Jeq(ioprioWhoProcess, "who_arg1", "deny")

	a.Label("pid_arg0")
	a.Load(offArg(0))
	a.Jeq(0, "allow", "deny")
	a.Label("who_arg1")
	a.Load(offArg(1))
	a.Jeq(0, "allow", "deny")

	a.Label("allow")
	a.Ret(unix.SECCOMP_RET_ALLOW)
	a.Label("deny")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	return a.Assemble()
}

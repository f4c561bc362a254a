package main

import (
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/internal/seccomp"
)

// The plugin needs CAP_SYS_ADMIN for one thing: the kernel runs Get Log
// Page through NVME_IOCTL_ADMIN_CMD only for callers that have it. The
// capability also unlocks much else (loading BPF programs, mounts,
// namespaces, the kernel log, keys); confineFilter takes from the process
// every system call that capability would open up and the plugin never
// makes, and every ioctl but the admin command:
//
//	not the native audit arch, x32              -> ENOSYS
//	ioctl(NVME_IOCTL_ADMIN_CMD)                  -> allow
//	ioctl(any other request)                     -> EPERM
//	bpf, perf_event_open                         -> EPERM
//	mount, umount2, pivot_root, fsopen, fsconfig,
//	fsmount, fspick, move_mount, open_tree,
//	open_tree_attr, mount_setattr, listmount,
//	statmount                                    -> EPERM
//	add_key, request_key, keyctl                 -> EPERM
//	setns, unshare, clone with a CLONE_NEW* flag -> EPERM
//	clone3                                       -> ENOSYS (its flags are in memory the filter cannot read; callers fall back to clone)
//	ptrace, process_vm_readv/writev, pidfd_getfd,
//	kcmp, userfaultfd, syslog, swapon, swapoff,
//	sethostname, setdomainname, quotactl,
//	quotactl_fd, fanotify_init, vhangup, acct,
//	reboot, init_module, finit_module,
//	delete_module, kexec_load, kexec_file_load,
//	io_uring_setup/enter/register               -> EPERM
//	everything else                              -> allow
//
// A denylist, not an allowlist: the Go runtime, gRPC and the SDK make many
// calls whose set changes with their versions, and none of the rest needs
// CAP_SYS_ADMIN. ioctl's request is an unsigned int: the filter reads its
// low 32 bits, as the kernel does.
var confinedSyscalls = []uint32{
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE,
	unix.SYS_OPEN_TREE_ATTR, unix.SYS_MOUNT_SETATTR, unix.SYS_LISTMOUNT, unix.SYS_STATMOUNT,
	unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
	unix.SYS_SETNS, unix.SYS_UNSHARE,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
	unix.SYS_KCMP, unix.SYS_USERFAULTFD, unix.SYS_SYSLOG, unix.SYS_SWAPON, unix.SYS_SWAPOFF,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
	unix.SYS_FANOTIFY_INIT, unix.SYS_VHANGUP, unix.SYS_ACCT, unix.SYS_REBOOT,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
}

// cloneNamespaces are clone(2)'s flags that make new namespaces.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// confineFilter is the program above.
func confineFilter() ([]bpf.RawInstruction, error) {
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
	a.Jeq(unix.SYS_IOCTL, "ioctl", "")
	a.Jeq(unix.SYS_CLONE, "clone", "")
	a.Jeq(unix.SYS_CLONE3, "enosys", "")
	for _, nr := range confinedSyscalls {
		a.Jeq(nr, "deny", "")
	}
	a.Jmp("allow")
	a.Label("ioctl")
	a.Load(seccomp.OffArg(1))
	a.Jeq(nvmeAdminCmdIoctl, "allow", "deny")
	a.Label("clone")
	a.Load(seccomp.OffArg(0))
	a.Jset(cloneNamespaces, "deny", "allow")
	a.Label("allow")
	a.Ret(unix.SECCOMP_RET_ALLOW)
	a.Label("deny")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.Label("enosys")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	return a.Assemble()
}

// confine installs confineFilter on every thread of the process.
func confine() error {
	raw, err := confineFilter()
	if err != nil {
		return err
	}
	return seccomp.InstallProcess("nvme", raw)
}

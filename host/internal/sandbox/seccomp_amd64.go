package sandbox

import "golang.org/x/sys/unix"

// nativeAudit is the audit arch of this build's system calls; a call of
// any other (i386 through int 0x80) gets ENOSYS.
const nativeAudit = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks x32 system calls, which carry AUDIT_ARCH_X86_64 but
// their own numbers.
const x32SyscallBit = 0x40000000

// metadataLegacy are amd64's calls that change file metadata besides the
// generic ones (metadata.go).
var metadataLegacy = []uint32{unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT}

//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// NativeAudit is the audit arch of this build's system calls; a filter
// answers a call of any other (i386 through int 0x80) with ENOSYS.
const NativeAudit = unix.AUDIT_ARCH_X86_64

// X32SyscallBit marks x32 system calls, which carry AUDIT_ARCH_X86_64 but
// their own numbers.
const X32SyscallBit = 0x40000000

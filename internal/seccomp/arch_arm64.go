//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// NativeAudit is the audit arch of this build's system calls; a filter
// answers a call of any other (32-bit Arm compat) with ENOSYS.
const NativeAudit = unix.AUDIT_ARCH_AARCH64

// X32SyscallBit: arm64 has no second ABI under the same audit arch.
const X32SyscallBit = 0

package sandbox

import "golang.org/x/sys/unix"

// nativeAudit is the audit arch of this build's system calls; a call of
// any other (32-bit Arm compat) gets ENOSYS.
const nativeAudit = unix.AUDIT_ARCH_AARCH64

// x32SyscallBit: arm64 has no second ABI under the same audit arch.
const x32SyscallBit = 0

// metadataLegacy: arm64 has only the generic calls (metadata.go).
var metadataLegacy []uint32

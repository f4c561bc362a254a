//go:build linux && !amd64 && !arm64

package seccomp

// NativeAudit 0: the filters have not been written for this architecture
// (its audit arch, a little-endian check of argument offsets); their users
// refuse to run without them.
const (
	NativeAudit   = 0
	X32SyscallBit = 0
)

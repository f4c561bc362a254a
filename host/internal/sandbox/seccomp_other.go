//go:build !amd64 && !arm64

package sandbox

// nativeAudit 0: the network filter has not been written for this
// architecture (its audit arch, a little-endian check of argument offsets),
// and the sandbox refuses plugins rather than run them without it.
const (
	nativeAudit   = 0
	x32SyscallBit = 0
)

// metadataLegacy: see seccomp_amd64.go.
var metadataLegacy []uint32

//go:build !amd64 && !arm64

package sandbox

// metadataLegacy: see seccomp_amd64.go. The filters are not written for
// this architecture (seccomp.NativeAudit is 0), and the sandbox refuses
// plugins rather than run them without them.
var metadataLegacy []uint32

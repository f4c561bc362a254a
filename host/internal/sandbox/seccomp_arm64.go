package sandbox

// metadataLegacy: arm64 has only the generic calls (metadata.go).
var metadataLegacy []uint32

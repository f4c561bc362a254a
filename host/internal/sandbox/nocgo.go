//go:build !cgo

package sandbox

// builtWithCgo: see CheckBuild (build.go).
const builtWithCgo = false

//go:build !cgo

package sandbox

// builtWithCgo: see CheckHost (build.go).
const builtWithCgo = false

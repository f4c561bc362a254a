//go:build !cgo

package main

// openLibrary refuses: loading a shared object needs the C loader.
func openLibrary(path string) (library, error) {
	return nil, errNoCgo
}

//go:build !linux

package main

import "errors"

// sealProgramLoads: there are no BPF programs off Linux (seal_linux.go).
func sealProgramLoads() error { return errors.New("BPF programs need Linux") }

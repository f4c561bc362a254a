//go:build !linux

package main

import (
	"errors"
	"io"

	"github.com/cilium/ebpf"
)

var errUnsupported = errors.New("classic tracepoints need Linux")

func attachTracepointAt(string, string, string, *ebpf.Program) (io.Closer, error) {
	return nil, errUnsupported
}

package main

import "github.com/cilium/ebpf"

// probeSpec is a program group's object and its variants by attach mode.
type probeSpec struct {
	spec     *ebpf.CollectionSpec
	variants map[string]variant
}

package main

import (
	"runtime/debug"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Loading the programs decodes the kernel's BTF (vmlinux, and sunrpc's
// module BTF for the NFS group) for CO-RE relocations and tp_btf/fentry
// targets. cilium/ebpf decodes it afresh for every collection unless the
// loads share a btf.Cache, and once they are done nothing needs it again:
// the programs run, and reading their maps uses no kernel types. Measured
// on this machine (Linux 6.18, 5.3 MB of vmlinux BTF, mmapped): each
// decode is about 9 ms and a few MiB of heap, and that garbage stayed
// resident (RSS 26.4 MiB from 1 s to 60 s after start, 13 MiB of it
// anonymous, against 15 MiB for the other plugins): an idle plugin
// allocates too little to start another collection, so it waits for the
// runtime's forced one (every 2 minutes) and then for the background
// scavenger. Kernels that cannot mmap /sys/kernel/btf/vmlinux (6.1) have
// it read into the heap too: more to return.

// beginLoads gives every load until the returned end one decoded copy of
// the kernel's BTF (loadOptions), and end drops it and returns the heap
// the loads used to the OS. Calls nest: an inner begin (the NFS group
// loaded by the refresh that Configure runs) shares the outer copy and its
// end does nothing. Called with p.mu held; end too.
func (p *plugin) beginLoads() (end func()) {
	if p.kernelTypes != nil {
		return func() {}
	}
	p.kernelTypes = btf.NewCache()
	return func() {
		p.kernelTypes = nil
		// The decoded types are garbage now: collect them and return
		// the freed pages at once. One collection of a live heap of
		// about 2 MiB.
		debug.FreeOSMemory()
	}
}

// loadOptions are the collection options of a load: the shared kernel
// types while beginLoads is in effect (none outside, and each load then
// decodes its own, as cilium/ebpf does by default), with extra added.
func (p *plugin) loadOptions(extra ebpf.ProgramOptions) *ebpf.CollectionOptions {
	return &ebpf.CollectionOptions{Programs: extra, Cache: p.kernelTypes}
}

package main

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// TestLoadsShareOneKernelTypes: the loads between beginLoads and its end
// get one btf.Cache (the kernel's BTF decoded once for all of them), a
// nested begin shares it, and after the outer end it is gone (nothing
// holds the decoded types) and loads decode their own again.
func TestLoadsShareOneKernelTypes(t *testing.T) {
	p := newPlugin()
	if o := p.loadOptions(ebpf.ProgramOptions{}); o.Cache != nil {
		t.Fatalf("a cache outside beginLoads: %p", o.Cache)
	}

	end := p.beginLoads()
	shared := p.kernelTypes
	if shared == nil {
		t.Fatal("beginLoads made no cache")
	}
	extra := []*btf.Spec{{}}
	o := p.loadOptions(ebpf.ProgramOptions{ExtraRelocationTargets: extra})
	if o.Cache != shared {
		t.Errorf("load options' cache %p, want the shared %p", o.Cache, shared)
	}
	if len(o.Programs.ExtraRelocationTargets) != 1 || o.Programs.ExtraRelocationTargets[0] != extra[0] {
		t.Errorf("the extra program options are lost: %+v", o.Programs)
	}

	endInner := p.beginLoads()
	if p.kernelTypes != shared {
		t.Errorf("a nested beginLoads replaced the cache: %p, want %p", p.kernelTypes, shared)
	}
	endInner()
	if p.kernelTypes != shared {
		t.Errorf("the nested end dropped the outer loads' cache")
	}

	end()
	if p.kernelTypes != nil {
		t.Errorf("the cache outlives its loads: %p", p.kernelTypes)
	}
	if o := p.loadOptions(ebpf.ProgramOptions{}); o.Cache != nil {
		t.Errorf("a cache after the end: %p", o.Cache)
	}
}

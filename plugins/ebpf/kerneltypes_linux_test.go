package main

import (
	"os"
	"runtime"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureReturnsLoadMemory: decoding the kernel's BTF for the loads
// leaves megabytes of garbage that the Go runtime would keep resident
// until the next collection (4-5 MiB here, 5.3 MB of vmlinux BTF); Configure
// returns it to the OS before it ends, keeps no decoded types, and every
// group still runs.
func TestConfigureReturnsLoadMemory(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skipf("no kernel BTF to decode: %v", err)
	}
	p := newPlugin()
	p.logf = func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }
	t.Cleanup(p.Close)
	before := residentHeap()
	err := sdktest.Configure(t, p, map[string]any{"object_store_connections": true}, sdk.Paths{Sysfs: "/sys", Procfs: "/proc", Rootfs: "/"})
	after := residentHeap()
	if err != nil {
		t.Fatal(err)
	}

	loaded := map[string]string{}
	for _, s := range p.programs {
		if s.loaded {
			loaded[s.event] = s.attach
		}
	}
	for _, e := range []string{"block_rq_issue", "block_rq_complete", "tcp_retransmit_skb", "inet_sock_set_state"} {
		if loaded[e] == "" {
			t.Errorf("%s runs in no mode (states %+v)", e, p.programs)
		}
	}
	if p.kernelTypes != nil {
		t.Error("Configure keeps the decoded kernel types")
	}
	// The loads' garbage is several MiB (4-5 here with three groups);
	// what a collection leaves of it, or freed spans not yet returned, is
	// resident until the background scavenger gets to it.
	const limit = 2 << 20
	if grown := after - before; grown > limit {
		t.Errorf("the Go heap's resident memory grew by %.1f MiB in Configure (at most %.1f MiB): the loads' memory was not returned to the OS", float64(grown)/(1<<20), float64(limit)/(1<<20))
	}
	t.Logf("resident heap %.1f MiB before Configure, %.1f MiB after", float64(before)/(1<<20), float64(after)/(1<<20))
}

// residentHeap is the heap memory the Go runtime holds from the OS: in
// use, or idle and not yet returned.
func residentHeap() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapSys - m.HeapReleased)
}

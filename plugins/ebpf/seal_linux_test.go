package main

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/internal/seccomp"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// The seal's decision table, run in a BPF VM (the real process under the
// shipped manifest: host/privileged_seal_test.go): the map commands the
// collects and refreshes make pass, every command that loads, attaches or
// reaches another program is refused, whatever bpf(2)'s high bits say.
func TestSealFilter(t *testing.T) {
	raw, err := sealFilter()
	if err != nil {
		t.Fatal(err)
	}
	allow, eperm, enosys := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	const highBits = 1 << 32
	cases := []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"map lookup", unix.SYS_BPF, []uint64{unix.BPF_MAP_LOOKUP_ELEM}, allow},
		{"map update", unix.SYS_BPF, []uint64{unix.BPF_MAP_UPDATE_ELEM}, allow},
		{"map delete", unix.SYS_BPF, []uint64{unix.BPF_MAP_DELETE_ELEM}, allow},
		{"map next key", unix.SYS_BPF, []uint64{unix.BPF_MAP_GET_NEXT_KEY}, allow},
		{"map lookup batch", unix.SYS_BPF, []uint64{unix.BPF_MAP_LOOKUP_BATCH}, allow},
		{"object info", unix.SYS_BPF, []uint64{unix.BPF_OBJ_GET_INFO_BY_FD}, allow},
		{"prog load", unix.SYS_BPF, []uint64{unix.BPF_PROG_LOAD}, eperm},
		{"prog load, high bits", unix.SYS_BPF, []uint64{unix.BPF_PROG_LOAD | highBits}, eperm},
		{"btf load", unix.SYS_BPF, []uint64{unix.BPF_BTF_LOAD}, eperm},
		{"link create", unix.SYS_BPF, []uint64{unix.BPF_LINK_CREATE}, eperm},
		{"link update", unix.SYS_BPF, []uint64{unix.BPF_LINK_UPDATE}, eperm},
		{"raw tracepoint open", unix.SYS_BPF, []uint64{unix.BPF_RAW_TRACEPOINT_OPEN}, eperm},
		{"prog attach", unix.SYS_BPF, []uint64{unix.BPF_PROG_ATTACH}, eperm},
		{"prog run", unix.SYS_BPF, []uint64{unix.BPF_PROG_RUN}, eperm},
		{"prog by id", unix.SYS_BPF, []uint64{unix.BPF_PROG_GET_FD_BY_ID}, eperm},
		{"a command of a later kernel", unix.SYS_BPF, []uint64{200}, eperm},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, nil, eperm},
		{"read", unix.SYS_READ, nil, allow},
	}
	for _, c := range cases {
		got, err := seccomp.Eval(raw, seccomp.NativeAudit, c.nr, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	if got, _ := seccomp.Eval(raw, seccomp.NativeAudit^1, unix.SYS_BPF, unix.BPF_MAP_LOOKUP_ELEM); got != enosys {
		t.Errorf("bpf of a foreign arch: %#x, want ENOSYS", got)
	}
	if seccomp.X32SyscallBit != 0 {
		if got, _ := seccomp.Eval(raw, seccomp.NativeAudit, seccomp.X32SyscallBit|unix.SYS_BPF, unix.BPF_PROG_LOAD); got != enosys {
			t.Errorf("x32 bpf: %#x, want ENOSYS", got)
		}
	}
}

// A sealed process refuses a second Configure instead of failing its
// loads; the host configures a process once.
func TestSecondConfigureOfSealedProcess(t *testing.T) {
	p := newPlugin()
	p.sealed = true
	if err := sdktest.Configure(t, p, map[string]any{}, sdk.Paths{}); err == nil || err.Error() != errSealed.Error() {
		t.Fatalf("Configure of a sealed process: %v, want errSealed", err)
	}
}

// A sealed process that must load the NFS group later (an NFS mount
// appeared) ends itself for the host to start a fresh one, which loads the
// group in its Configure; it never tries the load under the seal, where it
// would fail.
func TestSealedProcessRestartsForNFSGroup(t *testing.T) {
	requireRoot(t)
	// nfs_latency: true tries at Configure (and on a kernel without
	// sunrpc fails: counted once) and again when the NFS mounts change.
	p, _ := startIn(t, map[string]any{"tcp_retransmits": false, "disk": false, "nfs_latency": true}, procWithMounts(t, "testdata/mounts-no-nfs"))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nfs.probe != nil {
		t.Skip("the NFS group loaded at Configure: this kernel has sunrpc; nothing is left to load later")
	}
	var restarts []string
	p.sealed, p.restart = true, func(reason string) { restarts = append(restarts, reason) }
	data, err := os.ReadFile("testdata/mounts-nfs-volumes")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.mounts, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p.refreshNFSLatency()
	if len(restarts) != 1 || !strings.Contains(restarts[0], "nfs_latency") {
		t.Fatalf("restarts = %q, want one naming nfs_latency", restarts)
	}
	if p.nfs.probe != nil {
		t.Error("the NFS group loaded under the seal")
	}
	p.refreshNFSLatency() // the same mounts: already handled
	if len(restarts) != 1 {
		t.Errorf("restarted again for the same mounts: %q", restarts)
	}
}

package main

// The ebpf plugin in its manifest's sandbox (as the unprivileged plugin user with
// CAP_BPF and CAP_PERFMON only, Landlock, the seccomp filter): its tp_btf
// programs load and attach, and its disk counters move by exactly the
// block I/O the test does.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestEBPFPluginSandboxed(t *testing.T) {
	st := newSandboxTree(t)
	copyFile(t, filepath.Join(binDir, "shipped", "plexporter-ebpf"), filepath.Join(st.plugins, "plexporter-ebpf"), 0o755)
	copyFile(t, filepath.Join("..", "plugins", "ebpf", "plexporter-ebpf.yaml"), filepath.Join(st.plugins, "plexporter-ebpf.yaml"), 0o644)
	dev := sandboxLoopDevice(t)
	h := startSandboxHost(t, st, "  ebpf: {config: {nfs_servers: [192.0.2.1], object_store_endpoints: [192.0.2.10]}}\n")
	text, before := h.scrape("")
	if value(before, "plexporter_plugin_sandboxed", "plugin", "ebpf") != 1 || value(before, "plexporter_plugin_up", "plugin", "ebpf") != 1 {
		t.Fatalf("ebpf not up and sandboxed:\n%s", text)
	}
	for _, ev := range []string{"block_rq_issue", "block_rq_complete", "tcp_retransmit_skb", "inet_sock_set_state", "sock_send_length", "sock_recv_length"} {
		if got := value(before, "ebpf_program_loaded", "program", ev, "attach", "tp_btf"); got != 1 {
			t.Errorf("%s: ebpf_program_loaded{attach=tp_btf} = %v in the sandbox:\n%s", ev, got, h.logs.String())
		}
	}
	const writes = 29
	fd, err := unix.Open(dev, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 2*4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&raw[0]))%4096)
	buf := raw[off%4096 : off%4096+4096]
	for i := range writes {
		if _, err := unix.Pwrite(fd, buf, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(fd)
	_, after := h.scrape("")
	name := filepath.Base(dev)
	was := value(before, "disk_writes_completed_total", "device", name)
	if was < 0 {
		was = 0 // no series before the device's first write
	}
	if got := value(after, "disk_writes_completed_total", "device", name) - was; got != writes {
		t.Errorf("disk_writes_completed_total{device=%q} moved by %v in the sandbox, want %d", name, got, writes)
	}
	if got := value(after, "plexporter_plugin_collect_errors_total", "plugin", "ebpf"); got > 0 {
		t.Errorf("ebpf collect errors in the sandbox:\n%s", h.logs.String())
	}
}

// sandboxLoopDevice attaches a 4 MiB temporary file to a free loop device
// with direct I/O.
func sandboxLoopDevice(t *testing.T) string {
	t.Helper()
	backing := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(backing, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", "--direct-io=on", backing).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

package main

// The privileged plugins reduced (issue 29): a compromised ebpf plugin
// (CAP_BPF, CAP_PERFMON) or nvme plugin (CAP_SYS_ADMIN) could load a tracing
// program that reads another process's memory (bpf_probe_read_user) or kills
// it (bpf_send_signal). Each test runs the plugin's test build (build tag
// sealprobe: the shipped plugin, restricted as shipped, that also reports
// what plugins/internal/privprobe's attempts answered from inside its process)
// under the shipped manifest in the host's sandbox, once as shipped and once
// with the restriction off (PLEXPORTER_SEALPROBE_OFF, which only that
// build reads), so the test fails if the restriction goes.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// buildSealProbe builds plugins/<name> with the sealprobe tag.
func buildSealProbe(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plexporter-"+name)
	cmd := exec.Command("go", "build", "-tags", "sealprobe", "-o", out, "../plugins/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s -tags sealprobe: %v\n%s", name, err, b)
	}
	return out
}

// startSealProbe installs the sealprobe build of plugin name with its
// shipped manifest (plus env: [PLEXPORTER_SEALPROBE_OFF]) and starts a
// sandboxed host; off leaves the plugin's restriction off.
func startSealProbe(t *testing.T, bin, name, pluginsYAML string, off bool) *host {
	t.Helper()
	st := newSandboxTree(t)
	copyFile(t, bin, filepath.Join(st.plugins, "plexporter-"+name), 0o755)
	m, err := os.ReadFile(filepath.Join("..", "plugins", name, "plexporter-"+name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m), "\nenv: []\n") {
		t.Fatalf("the %s manifest has no 'env: []' line to extend", name)
	}
	m = []byte(strings.Replace(string(m), "\nenv: []\n", "\nenv: [PLEXPORTER_SEALPROBE_OFF]\n", 1))
	if err := os.WriteFile(filepath.Join(st.plugins, "plexporter-"+name+".yaml"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	v := "0"
	if off {
		v = "1"
	}
	t.Setenv("PLEXPORTER_SEALPROBE_OFF", v)
	h := startSandboxHost(t, st, pluginsYAML)
	return h
}

// probeErrnos scrapes h and returns <plugin>_sealprobe_errno by attempt.
func probeErrnos(t *testing.T, h *host, plugin string) (map[string]float64, map[string]*dto.MetricFamily) {
	t.Helper()
	text, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_sandboxed", "plugin", plugin) != 1 || value(mfs, "plexporter_plugin_up", "plugin", plugin) != 1 {
		t.Fatalf("%s not up and sandboxed:\n%s\nlogs:\n%s", plugin, text, h.logs.String())
	}
	out := map[string]float64{}
	for _, m := range mfs[plugin+"_sealprobe_errno"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "attempt" {
				out[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s_sealprobe_errno in the scrape:\n%s", plugin, text)
	}
	return out, mfs
}

func TestEBPFSealedAfterConfigure(t *testing.T) {
	bin := buildSealProbe(t, "ebpf")
	dev := sandboxLoopDevice(t)
	const cfg = "  ebpf: {config: {nfs_servers: [192.0.2.1], object_store_endpoints: [192.0.2.10]}}\n"

	sealed := startSealProbe(t, bin, "ebpf", cfg, false)
	got, before := probeErrnos(t, sealed, "ebpf")
	for _, a := range []string{"bpf_send_signal", "bpf_probe_read_user", "perf_event_open"} {
		if got[a] != float64(unix.EPERM) {
			t.Errorf("sealed: %s answered errno %v, want EPERM (%d)", a, got[a], unix.EPERM)
		}
	}
	if !strings.Contains(sealed.logs.String(), "BPF program loading sealed") {
		t.Errorf("no log line saying program loading is sealed:\n%s", sealed.logs.String())
	}
	// The collects' map reads still work under the seal: the disk counter
	// moves by exactly the writes made.
	for _, ev := range []string{"block_rq_issue", "block_rq_complete", "tcp_retransmit_skb"} {
		if v := value(before, "ebpf_program_loaded", "program", ev, "attach", "tp_btf"); v != 1 {
			t.Errorf("%s: ebpf_program_loaded{attach=tp_btf} = %v", ev, v)
		}
	}
	const writes = 17
	directWrites(t, dev, writes)
	_, after := sealed.scrape("")
	name := filepath.Base(dev)
	was := max(value(before, "disk_writes_completed_total", "device", name), 0)
	if d := value(after, "disk_writes_completed_total", "device", name) - was; d != writes {
		t.Errorf("sealed: disk_writes_completed_total{device=%q} moved by %v, want %d", name, d, writes)
	}
	if v := value(after, "plexporter_plugin_collect_errors_total", "plugin", "ebpf"); v > 0 {
		t.Errorf("sealed: %v collect errors:\n%s", v, sealed.logs.String())
	}
	if v := value(after, "plexporter_plugin_restarts_total", "plugin", "ebpf"); v > 0 {
		t.Errorf("sealed: the plugin restarted %v times:\n%s", v, sealed.logs.String())
	}

	// The same build and manifest with the seal off: the programs load, so
	// it is the seal that denies them above.
	open := startSealProbe(t, bin, "ebpf", cfg, true)
	got, _ = probeErrnos(t, open, "ebpf")
	for _, a := range []string{"bpf_send_signal", "bpf_probe_read_user"} {
		if got[a] != 0 {
			t.Errorf("seal off: %s answered errno %v, want success: the test cannot tell the seal's EPERM from another denial", a, got[a])
		}
	}
	t.Logf("seal off: perf_event_open answered errno %v (kernel.perf_event_paranoid decides)", got["perf_event_open"])
}

// directWrites makes n 4 KiB O_DIRECT writes to dev.
func directWrites(t *testing.T, dev string, n int) {
	t.Helper()
	fd, err := unix.Open(dev, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	raw := make([]byte, 2*4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&raw[0]))%4096)
	buf := raw[off%4096 : off%4096+4096]
	for i := range n {
		if _, err := unix.Pwrite(fd, buf, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNVMeConfined(t *testing.T) {
	bin := buildSealProbe(t, "nvme")
	confined := startSealProbe(t, bin, "nvme", "", false)
	got, mfs := probeErrnos(t, confined, "nvme")
	for _, a := range []string{"bpf_send_signal", "bpf_probe_read_user", "perf_event_open", "mount", "ioctl_fionread"} {
		if got[a] != float64(unix.EPERM) {
			t.Errorf("confined: %s answered errno %v, want EPERM (%d)", a, got[a], unix.EPERM)
		}
	}
	if v := value(mfs, "plexporter_plugin_collect_errors_total", "plugin", "nvme"); v > 0 {
		t.Errorf("confined: %v collect errors:\n%s", v, confined.logs.String())
	}

	// The same build and manifest without the filter: CAP_SYS_ADMIN loads
	// the programs, the mount gets as far as looking up its (missing)
	// target, the ioctl runs. So it is the filter that denies them above.
	open := startSealProbe(t, bin, "nvme", "", true)
	got, _ = probeErrnos(t, open, "nvme")
	want := map[string]float64{"bpf_send_signal": 0, "bpf_probe_read_user": 0, "mount": float64(unix.ENOENT), "ioctl_fionread": 0}
	for a, w := range want {
		if got[a] != w {
			t.Errorf("filter off: %s answered errno %v, want %v: the test cannot tell the filter's EPERM from another denial", a, got[a], w)
		}
	}
	t.Logf("filter off: perf_event_open answered errno %v (kernel.perf_event_paranoid decides)", got["perf_event_open"])
}

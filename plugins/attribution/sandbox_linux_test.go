package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

// TestInHostSandbox runs the plugin as the host runs it, as root: in the
// sandbox of its shipped manifest (its network.unix grant overridden with
// the fake kubelet's directory, as README.md tells an operator with
// another socket path to do), as the plugin's own user, over this
// machine's /sys. The fake kubelet's socket is root's with mode 0755, as
// the kubelet's is: that the plugin reaches it shows the manifest's
// CAP_DAC_OVERRIDE is granted and enough.
//
// Without the grant (the shipped manifest as it is) the sandbox refuses
// the connect, and the error says what to grant.
func TestInHostSandbox(t *testing.T) {
	t.Run("granted", func(t *testing.T) { inHostSandbox(t, true) })
	t.Run("shipped manifest", func(t *testing.T) { inHostSandbox(t, false) })
}

func inHostSandbox(t *testing.T, grant bool) {
	if testing.Short() {
		t.Skip("builds the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	k := fixtureKubelet(t)
	k.setPods(pod("ml", "trainer-0", "trainer", "nvidia.com/gpu", "GPU-8f3a6c1e"))
	// The plugin's user must walk to the socket; the kubelet's directory is
	// 0750 root on a node, which CAP_DAC_OVERRIDE passes too, but the
	// directory of the test must also satisfy the host's trust rules.
	if err := os.Chmod(filepath.Dir(k.Socket), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(k.Socket); err != nil || fi.Mode().Perm()&0o002 != 0 {
		t.Fatalf("the fake kubelet's socket is world-writable (%v, %v): the test would not show the capability is needed", fi.Mode(), err)
	}

	dir, err := os.MkdirTemp("", "plexporter-attribution-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	plugins := filepath.Join(dir, "plugins")
	for _, d := range []string{dir, plugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	build(t, filepath.Join(dir, "plexporter"), "./host")
	build(t, filepath.Join(plugins, "plexporter-attribution"), "./plugins/attribution")
	manifest, err := os.ReadFile("plexporter-attribution.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "plexporter-attribution.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "plexporter.yml")
	// The shipped config's opt-in to the manifest's CAP_DAC_OVERRIDE.
	config := fmt.Sprintf(`plugins:
  attribution:
    allow_capabilities: [CAP_DAC_OVERRIDE]
    config:
      pod_resources_socket: %s
`, k.Socket)
	if grant {
		config += fmt.Sprintf("    manifest:\n      network:\n        unix: [%s]\n", filepath.Dir(k.Socket))
	}
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(filepath.Join(dir, "plexporter"), "--plugin.dir="+plugins, "--config.file="+cfg,
		"--path.sysfs=/sys", "--path.procfs=/proc", "--path.rootfs=/", "--web.listen-address="+addr,
		// A unix grant is refused below Landlock ABI 9 without it
		// (README.md, The sandbox); this machine's kernel may be older.
		"--plugin.allow-any-unix-connect")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})

	var text string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		text = get(addr)
		if strings.Contains(text, `attribution_collection_errors_total{collector="pod_resources"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attribution series after 60s:\n%s", text)
		}
	}
	if !grant {
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs.String(), "the sandbox allows no connect"); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no error saying the sandbox refused the connect")
			}
		}
		if !strings.Contains(logs.String(), "kubelet pod-resources socket "+k.Socket+": connect: operation not permitted") {
			t.Error("the refused connect's error does not name the socket and EPERM")
		}
		if strings.Contains(text, "device_pod_info") || k.lists.Load() != 0 {
			t.Error("the kubelet was reached without a network grant")
		}
		return
	}
	for _, want := range []string{
		`plexporter_plugin_sandboxed{plugin="attribution"} 1`,
		`plexporter_plugin_up{plugin="attribution"} 1`,
		`device_pod_info{device_kind="other",device="GPU-8f3a6c1e",pci_address="",resource="nvidia.com/gpu",namespace="ml",pod="trainer-0",container="trainer"} 1`,
		`attribution_collection_errors_total{collector="pod_resources"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the sandboxed plugin's output lacks %s", want)
		}
	}
	if k.lists.Load() == 0 {
		t.Error("the fake kubelet saw no List")
	}
}

func get(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// build compiles pkg of this module statically, as the Makefile does.
func build(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// Package demotest runs the demo (make demo) inside a test: the host and
// the demo builds of every shipped plugin, with their manifests, over the
// node of package demotree. The dashboard and demo tests scrape it.
package demotest

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/demo/demotree"

	"github.com/plexporter/plexporter/internal/syncbuf"
)

// Host is a running demo host.
type Host struct {
	URL     string // http://127.0.0.1:<port>
	Plugins []string
	Tree    demotree.Tree
	logs    *syncbuf.Buffer
}

// Logs returns what the host has logged so far.
func (h *Host) Logs() string { return h.logs.String() }

// Start builds the host and the demo plugins from the module at repo,
// lays the node out, starts the host as make demo does (each plugin in its
// manifest's sandbox when the test runs as root) and waits until it is
// ready. The host stops when the test ends.
func Start(t testing.TB, repo string) *Host {
	t.Helper()
	repo, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	// A directory the plugins' user can walk, owned by root and writable
	// by nobody else (the sandbox's trust rules), under the sticky /tmp.
	dir, err := os.MkdirTemp("", "plexporter-demo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &Host{logs: &syncbuf.Buffer{}}
	build(t, repo, filepath.Join(dir, "plexporter"), "./host")
	mains, _ := filepath.Glob(filepath.Join(repo, "plugins", "*", "main.go"))
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		h.Plugins = append(h.Plugins, name)
		build(t, repo, filepath.Join(plugins, "plexporter-"+name), "./plugins/"+name, "-tags", "demo")
		manifest, err := os.ReadFile(filepath.Join(repo, "plugins", name, "plexporter-"+name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plugins, "plexporter-"+name+".yaml"), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.Plugins) == 0 {
		t.Fatalf("no plugins under %s/plugins", repo)
	}
	if h.Tree, err = demotree.Build(repo, filepath.Join(dir, "node")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "plexporter.yml")
	if err := os.WriteFile(cfg, []byte(demotree.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	h.URL = "http://" + addr
	cmd := exec.Command(filepath.Join(dir, "plexporter"), "--plugin.dir="+plugins, "--config.file="+cfg,
		"--path.sysfs="+h.Tree.Sysfs, "--path.procfs="+h.Tree.Procfs, "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = h.logs, h.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("demo host log:\n%s", h.logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !h.ready() {
		if time.Now().After(deadline) {
			t.Fatalf("demo host not ready after 20s:\n%s", h.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

func (h *Host) ready() bool {
	resp, err := http.Get(h.URL + "/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// build compiles pkg of the module at repo to out, statically, as the
// Makefile does.
func build(t testing.TB, repo, out, pkg string, flags ...string) {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s %s: %v\n%s", strings.Join(flags, " "), pkg, err, b)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Get fetches path from the host and returns the body, failing the test on
// anything but 200.
func (h *Host) Get(t testing.TB, path string) string {
	t.Helper()
	resp, err := http.Get(h.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b.String())
	}
	return b.String()
}

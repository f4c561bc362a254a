// Package hosttest runs the real plexporter host in a test: it builds the
// host and plugins as make build does, lays out a plugin directory the
// sandbox's trust rules accept, starts the host (each plugin in its
// manifest's sandbox when the test runs as root), waits until it is ready
// and scrapes it. The end-to-end tests of plugins and examples share it so
// that every one of them starts the host the same way an operator does.
package hosttest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

// Binary is one program of this module to compile.
type Binary struct {
	Pkg   string   // the package as go build takes it, relative to Dir
	Out   string   // the executable's path
	Dir   string   // where go build runs; "" is the test's package directory
	Flags []string // more go build flags, e.g. -tags demo
	// Cgo builds with CGO_ENABLED=1 (plexporter-so). Otherwise the build is
	// static, as the Makefile's: the sandbox needs a CGO_ENABLED=0 host.
	Cgo bool
}

// Build compiles b, returning go build's output with its error.
func (b Binary) Build() error {
	cmd := exec.Command("go", append(append([]string{"build"}, b.Flags...), "-o", b.Out, b.Pkg)...)
	cmd.Dir = b.Dir
	cgo := "CGO_ENABLED=0"
	if b.Cgo {
		cgo = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s %s: %v\n%s", strings.Join(b.Flags, " "), b.Pkg, err, out)
	}
	return nil
}

// Build compiles every binary, failing the test on the first that does
// not build.
func Build(t testing.TB, bins ...Binary) {
	t.Helper()
	for _, b := range bins {
		if err := b.Build(); err != nil {
			t.Fatal(err)
		}
	}
}

// TrustedDir creates a directory under the sticky /tmp, and sub (paths
// relative to it) inside, that the sandbox's trust rules accept: owned by
// root (the test's user), writable by nobody else and walkable by the
// plugins' user, which t.TempDir's 0700 directories are not. It is removed
// when the test ends.
func TrustedDir(t testing.TB, prefix string, sub ...string) string {
	t.Helper()
	root, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	dirs := []string{root}
	for _, s := range sub {
		// Every level, so that a umask cannot leave one the plugin cannot walk.
		for d := filepath.Join(root, s); d != root; d = filepath.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// InstallManifest copies the manifest file at path into pluginDir under
// its own name, with extra (manifest YAML) appended.
func InstallManifest(t testing.TB, pluginDir, path, extra string) {
	t.Helper()
	m, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(pluginDir, filepath.Base(path)), append(m, extra...))
}

// WriteFile writes data to path, readable by the plugins' user whatever
// the umask.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FreeAddr returns a loopback address no one listens on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Options is how to start a host.
type Options struct {
	Binary    string // the plexporter executable
	PluginDir string // --plugin.dir
	// Config is the content of the config file, written as plexporter.yml
	// beside PluginDir (a directory the test owns).
	Config string
	Args   []string // more host flags
	Env    []string // added to the test's environment
	// UnconfinedUnlessRoot passes --no-plugin.sandbox when the test does
	// not run as root, where the host's default, the sandbox, cannot start.
	UnconfinedUnlessRoot bool
	// Ready is how long the host may take to answer /ready; at least
	// MinWait.
	Ready time.Duration
}

// Host is a running host.
type Host struct {
	Addr       string // 127.0.0.1:<port>
	URL        string // http://<Addr>
	ConfigFile string
	cmd        *exec.Cmd
	logs       *syncbuf.Buffer
	stop       sync.Once
}

// Start writes the config file, starts the host and waits until it
// answers /ready: every plugin has started, failed its first start or
// been refused. /ready collects nothing, so the test's first scrape is
// each plugin's first Collect. The host stops when the test ends, and its
// log is printed if the test failed.
func Start(t testing.TB, o Options) *Host {
	t.Helper()
	h := &Host{Addr: FreeAddr(t), ConfigFile: filepath.Join(filepath.Dir(o.PluginDir), "plexporter.yml"), logs: &syncbuf.Buffer{}}
	h.URL = "http://" + h.Addr
	WriteFile(t, h.ConfigFile, []byte(o.Config))
	args := []string{"--plugin.dir=" + o.PluginDir, "--config.file=" + h.ConfigFile, "--web.listen-address=" + h.Addr}
	if o.UnconfinedUnlessRoot && os.Geteuid() != 0 {
		args = append(args, "--no-plugin.sandbox")
	}
	h.cmd = exec.Command(o.Binary, append(args, o.Args...)...)
	h.cmd.Env = append(os.Environ(), o.Env...)
	h.cmd.Stdout, h.cmd.Stderr = h.logs, h.logs
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", o.Binary, err)
	}
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			t.Logf("host log:\n%s", h.logs.String())
		}
	})
	WaitFor(t, o.Ready, "the host to answer /ready", func() bool {
		status, _, err := h.Fetch("/ready")
		return err == nil && status == http.StatusOK
	})
	return h
}

// Stop ends the host (SIGTERM, as systemd does) and waits for it; later
// calls do nothing.
func (h *Host) Stop() {
	h.stop.Do(func() {
		h.cmd.Process.Signal(syscall.SIGTERM)
		h.cmd.Wait()
	})
}

// Pid is the host process's.
func (h *Host) Pid() int { return h.cmd.Process.Pid }

// Logs returns what the host has logged so far.
func (h *Host) Logs() string { return h.logs.String() }

// Fetch GETs path; err is only for no response at all.
func (h *Host) Fetch(path string) (status int, body string, err error) {
	resp, err := http.Get(h.URL + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Get fetches path and returns the body, failing the test on anything but
// 200.
func (h *Host) Get(t testing.TB, path string) string {
	t.Helper()
	status, body, err := h.Fetch(path)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	return body
}

// Metrics is /metrics as the host answers it, whatever the status, or the
// error for no answer: what a test polls until the series it waits for
// appear.
func (h *Host) Metrics() string {
	_, body, err := h.Fetch("/metrics")
	if err != nil {
		return err.Error()
	}
	return body
}

// TryScrape fetches /metrics<query> and parses it.
func (h *Host) TryScrape(query string) (map[string]*dto.MetricFamily, error) {
	status, body, err := h.Fetch("/metrics" + query)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics%s: %d %s", query, status, body)
	}
	return parse(body)
}

// Scrape fetches /metrics and returns it parsed and as text, failing the
// test on anything but a 200 in the text format.
func (h *Host) Scrape(t testing.TB) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	body := h.Get(t, "/metrics")
	return Parse(t, body), body
}

// Parse parses an exposition in the text format, failing the test if it
// is not one.
func Parse(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := parse(text)
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, text)
	}
	return mfs
}

func parse(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// Value is the value of family's first series whose labels include the
// given name/value pairs, and whether there is one.
func Value(mfs map[string]*dto.MetricFamily, family string, labels ...string) (float64, bool) {
	if len(labels)%2 != 0 {
		panic(errors.New("hosttest.Value: labels are name/value pairs"))
	}
	for _, m := range mfs[family].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i < len(labels); i += 2 {
			match = match && have[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// MinWait is the shortest deadline WaitFor gives a condition. A deadline
// only matters when the test fails, and a machine loaded by other tests
// can take many times longer than a quiet one for work that takes well
// under a second: a shorter d is raised to this, so that no test fails for
// the machine's speed (what it waits for still has to happen).
const MinWait = 60 * time.Second

// WaitFor polls ok every 50 ms until it holds, failing the test after d,
// or after MinWait if d is shorter.
func WaitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	d = max(d, MinWait)
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

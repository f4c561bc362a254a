package python

// The Python plugin as the host runs it: packed by package.sh, installed
// with its manifest, started by a real host (in its sandbox when the test
// runs as root, as CI does) and scraped.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/internal/testkit/hosttest"
	"github.com/plexporter/plexporter/sdk/transport"
)

// python is the interpreter of the plugin's #! line.
const python = "/usr/bin/python3"

// requirePython skips the test where the Debian packages the plugin needs
// are missing, unless PLEXPORTER_REQUIRE_PYTHON is set (CI sets it), which
// makes their absence a failure.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import grpc, google.protobuf, cryptography").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s cannot import grpc, google.protobuf and cryptography (Debian packages python3-grpcio, python3-protobuf, python3-cryptography): %v %s", python, err, bytes.TrimSpace(out))
	if os.Getenv("PLEXPORTER_REQUIRE_PYTHON") != "" {
		t.Fatal(msg + "; PLEXPORTER_REQUIRE_PYTHON is set, so this is a failure")
	}
	t.Skip(msg)
}

var binDir string // the host and the packed plugin, built once (TestMain)

// buildOnce builds the host as make build does (static: the sandbox needs a
// CGO_ENABLED=0 host) and packs the plugin with package.sh.
var buildOnce = sync.OnceValue(func() error {
	if err := (hosttest.Binary{Pkg: "../../host", Out: filepath.Join(binDir, "plexporter")}).Build(); err != nil {
		return err
	}
	if out, err := exec.Command("./package.sh", filepath.Join(binDir, "plexporter-pyexample")).CombinedOutput(); err != nil {
		return fmt.Errorf("package.sh: %v\n%s", err, out)
	}
	return nil
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plexporter-python-bin")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pyHost is a running host with the Python plugin installed.
type pyHost struct {
	t *testing.T
	*hosttest.Host
	procfs string // the procfs copy, if the setup asked for one
}

// setup is what a test varies: the plugin's section of the host's config
// file (indented under plugins.pyexample), the procfs root (a copy of
// testdata/<procfs>, or "" for the real /proc) and extra host flags.
type setup struct {
	config   string
	procfs   string
	flags    []string
	manifest string // appended to the shipped manifest
	// prepare, if set, changes the procfs copy before the host starts.
	prepare func(t *testing.T, procfs string)
}

func startHost(t *testing.T, s setup) *pyHost {
	t.Helper()
	requirePython(t)
	if err := buildOnce(); err != nil {
		t.Fatal(err)
	}
	dir := hosttest.TrustedDir(t, "plexporter-python", "plugins")
	plugins := filepath.Join(dir, "plugins")
	copyFile(t, filepath.Join(binDir, "plexporter-pyexample"), filepath.Join(plugins, "plexporter-pyexample"), 0o755)
	hosttest.InstallManifest(t, plugins, "plexporter-pyexample.yaml", s.manifest)
	args := []string{"--log.level=debug"}
	if s.procfs != "" {
		procfs := filepath.Join(dir, "proc")
		copyTree(t, filepath.Join("testdata", s.procfs), procfs)
		if s.prepare != nil {
			s.prepare(t, procfs)
		}
		args = append(args, "--path.procfs="+procfs)
	}
	host := hosttest.Start(t, hosttest.Options{
		Binary:    filepath.Join(binDir, "plexporter"),
		PluginDir: plugins,
		Config:    "plugins:\n  pyexample:\n" + s.config,
		Args:      append(args, s.flags...),
	})
	return &pyHost{t: t, Host: host, procfs: filepath.Join(dir, "proc")}
}

func (h *pyHost) waitFor(d time.Duration, what string, ok func() bool) {
	h.t.Helper()
	hosttest.WaitFor(h.t, d, what, ok)
}

func (h *pyHost) scrape() map[string]*dto.MetricFamily {
	h.t.Helper()
	mfs, _ := h.Scrape(h.t)
	return mfs
}

// value is the value of family's series whose labels include the given
// name/value pairs; NaN when there is none.
func value(mfs map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	if v, ok := hosttest.Value(mfs, family, labels...); ok {
		return v
	}
	return math.NaN()
}

// expectHealthy checks what every healthy scrape of the plugin shows.
func expectHealthy(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	sandboxed := 0.0
	if os.Geteuid() == 0 {
		sandboxed = 1 // as root the host sandboxes every plugin
	}
	for family, want := range map[string]float64{
		"plexporter_plugin_up":             1,
		"plexporter_plugin_sandboxed":      sandboxed,
		"plexporter_plugin_scrape_success": 1,
		"plexporter_plugin_misconfigured":  0,
		"plexporter_plugin_restarts_total": 0,
	} {
		if got := value(mfs, family, "plugin", "pyexample"); got != want {
			t.Errorf(`%s{plugin="pyexample"} = %v, want %v`, family, got, want)
		}
	}
	if got := value(mfs, "plexporter_plugin_info", "plugin", "pyexample", "version", "0.1.0", "api_version", transport.APIVersion); got != 1 {
		t.Errorf("plexporter_plugin_info for version 0.1.0, api_version %s = %v, want 1 (series: %v)", transport.APIVersion, got, mfs["plexporter_plugin_info"].GetMetric())
	}
	for _, m := range mfs["plexporter_dropped_series_total"].GetMetric() {
		if m.GetCounter().GetValue() != 0 {
			t.Errorf("the host dropped series of the plugin: %v", m)
		}
	}
}

// procStat reads a counter line (ctxt, processes) of the real /proc/stat.
func procStat(t *testing.T, key string) float64 {
	t.Helper()
	f, err := os.Open("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if k, v, ok := strings.Cut(s.Text(), " "); ok && k == key {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/stat has no %s line", key)
	return 0
}

// TestServesTheNodesProcfs: in its sandbox, the plugin serves this
// machine's counters: each between what /proc/stat said just before and
// just after the scrape.
func TestServesTheNodesProcfs(t *testing.T) {
	h := startHost(t, setup{})
	ctxt, forks := procStat(t, "ctxt"), procStat(t, "processes")
	mfs := h.scrape()
	ctxtAfter, forksAfter := procStat(t, "ctxt"), procStat(t, "processes")
	expectHealthy(t, mfs)

	if v := value(mfs, "pyexample_context_switches_total"); !(ctxt <= v && v <= ctxtAfter) {
		t.Errorf("pyexample_context_switches_total = %v, want within [%v, %v] (/proc/stat before and after)", v, ctxt, ctxtAfter)
	}
	if v := value(mfs, "pyexample_forks_total"); !(forks <= v && v <= forksAfter) {
		t.Errorf("pyexample_forks_total = %v, want within [%v, %v]", v, forks, forksAfter)
	}
	if mfs["pyexample_context_switches_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("pyexample_context_switches_total is a %v, want a counter", mfs["pyexample_context_switches_total"].GetType())
	}
	for _, w := range []string{"1m", "5m", "15m"} {
		if v := value(mfs, "pyexample_load_average", "window", w); !(v >= 0) {
			t.Errorf(`pyexample_load_average{window=%q} = %v, want a load average (>= 0)`, w, v)
		}
	}
	// The thread that read loadavg was running, and is one of the tasks.
	runnable, tasks := value(mfs, "pyexample_scheduler_tasks_runnable"), value(mfs, "pyexample_scheduler_tasks")
	if !(runnable >= 1 && tasks >= runnable) {
		t.Errorf("pyexample_scheduler_tasks_runnable = %v, pyexample_scheduler_tasks = %v: want 1 <= runnable <= tasks", runnable, tasks)
	}
	if n := len(mfs["plexporter_plugin_collect_errors_total"].GetMetric()); n != 0 {
		t.Errorf("collect errors on this machine's procfs: %v", mfs["plexporter_plugin_collect_errors_total"].GetMetric())
	}
	// The plugin's hclog JSON line, re-logged by the host's relay at its level,
	// tagged with the plugin and with the plugin's own keys.
	if logs := h.Logs(); !strings.Contains(logs, `level=INFO source=relay.go`) || !containsLine(logs, "msg=configured plugin=pyexample", "procfs=/proc") {
		t.Errorf("no INFO line 'configured' tagged plugin=pyexample with procfs=/proc in the host log")
	}
}

// containsLine reports whether one line of logs contains every part.
func containsLine(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestPrefixAllowlistAndConfig: the values of a known procfs, under the
// configured metric prefix, only the families the allowlist enables (named
// with the prefix, a counter without _total) and only the configured load
// windows.
func TestPrefixAllowlistAndConfig(t *testing.T) {
	h := startHost(t, setup{
		procfs: "proc",
		config: "    metric_prefix: vendor_\n    config: {load_windows: [1m, 15m]}\n",
		flags:  []string{"--metrics.enabled=vendor_pyexample_load_average,vendor_pyexample_context_switches"},
	})
	mfs := h.scrape()
	expectHealthy(t, mfs)
	want := map[string]float64{ // testdata/proc
		`vendor_pyexample_load_average{window="1m"}`:  1.25,
		`vendor_pyexample_load_average{window="15m"}`: 0.5,
		`vendor_pyexample_context_switches_total`:     123456789,
	}
	got := map[string]float64{}
	for name, mf := range mfs {
		if strings.HasPrefix(name, "plexporter_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			series := name
			for _, l := range m.GetLabel() {
				series += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			got[series] = value(map[string]*dto.MetricFamily{name: {Metric: []*dto.Metric{m}}}, name)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series = %v\nwant     %v", got, want)
	}
}

// TestPartialErrorAndPushdown: a procfs without stat costs the stat
// families only, reported as a partial error of collector "stat"; with the
// allowlist enabling only the loadavg families the plugin does not read
// stat at all, so there is no error.
func TestPartialErrorAndPushdown(t *testing.T) {
	t.Run("all families", func(t *testing.T) {
		h := startHost(t, setup{procfs: "proc-without-stat"})
		mfs := h.scrape()
		expectHealthy(t, mfs) // a partial error is still a successful collect
		if v := value(mfs, "plexporter_plugin_collect_errors_total", "plugin", "pyexample", "collector", "stat"); !(v >= 1) {
			t.Errorf(`plexporter_plugin_collect_errors_total{collector="stat"} = %v, want >= 1`, v)
		}
		if v := value(mfs, "pyexample_load_average", "window", "5m"); v != 0.75 {
			t.Errorf(`pyexample_load_average{window="5m"} = %v, want 0.75 (testdata/proc-without-stat/loadavg)`, v)
		}
		if _, ok := mfs["pyexample_forks_total"]; ok {
			t.Error("pyexample_forks_total served without a stat file")
		}
		h.waitFor(5*time.Second, "the partial error logged at WARN", func() bool {
			return containsLine(h.Logs(), "level=WARN", "pyexample", "stat", "stat: no such file or directory")
		})
	})
	t.Run("loadavg families only", func(t *testing.T) {
		h := startHost(t, setup{procfs: "proc-without-stat", flags: []string{"--metrics.enabled=pyexample_load_*,pyexample_scheduler_*"}})
		mfs := h.scrape()
		expectHealthy(t, mfs)
		if errs := mfs["plexporter_plugin_collect_errors_total"].GetMetric(); len(errs) != 0 {
			t.Errorf("the plugin read stat although no family of it is enabled: %v", errs)
		}
		if v := value(mfs, "pyexample_scheduler_tasks"); v != 412 {
			t.Errorf("pyexample_scheduler_tasks = %v, want 412", v)
		}
	})
}

// TestMisconfigured: a setting the plugin cannot work with is an
// INVALID_ARGUMENT naming the key, which the host shows and does not restart.
func TestMisconfigured(t *testing.T) {
	for name, tc := range map[string]struct{ config, message string }{
		"bad window":  {"    config: {load_windows: [2m]}\n", `load_windows: '2m' is not one of 1m, 5m, 15m`},
		"not a list":  {"    config: {load_windows: 1m}\n", `load_windows: '1m' is not a list of strings`},
		"unknown key": {"    config: {interval: 10s}\n", `interval: unknown key`},
		"twice":       {"    config: {load_windows: [1m, 5m, 1m]}\n", `load_windows: '1m' is listed twice`},
		"a number":    {"    config: {load_windows: [1m, 5]}\n", `load_windows: 5.0 is not a string`},
		"a mapping":   {"    config: {load_windows: {1m: true}}\n", `load_windows: a mapping is not a list of strings`},
	} {
		t.Run(name, func(t *testing.T) {
			h := startHost(t, setup{procfs: "proc", config: tc.config})
			mfs := h.scrape()
			if got := value(mfs, "plexporter_plugin_misconfigured", "plugin", "pyexample"); got != 1 {
				t.Fatalf("plexporter_plugin_misconfigured = %v, want 1", got)
			}
			if got := value(mfs, "plexporter_plugin_up", "plugin", "pyexample"); got != 0 {
				t.Errorf("plexporter_plugin_up = %v, want 0", got)
			}
			if !strings.Contains(h.Logs(), tc.message) {
				t.Errorf("the host log does not say %q", tc.message)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
}

// copyTree copies a flat fixture directory, readable by the plugin's user.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Mkdir(to, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(to, 0o755)
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		copyFile(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()), 0o644)
	}
}

// TestSHA256Pin: the manifest's pin covers the whole packed plugin, stubs
// included: the packed file's own hash runs, any other is refused.
func TestSHA256Pin(t *testing.T) {
	requirePython(t)
	if err := buildOnce(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(binDir, "plexporter-pyexample"))
	if err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(b))
	h := startHost(t, setup{procfs: "proc", manifest: "sha256: " + sum + "\n"})
	expectHealthy(t, h.scrape())

	other := fmt.Sprintf("%x", sha256.Sum256(append(b, '\n')))
	h = startHost(t, setup{procfs: "proc", manifest: "sha256: " + other + "\n"})
	mfs := h.scrape()
	if got := value(mfs, "plexporter_plugin_refused", "plugin", "pyexample"); got != 1 {
		t.Errorf("plexporter_plugin_refused with a pin of another file = %v, want 1", got)
	}
	if _, ok := mfs["pyexample_load_average"]; ok {
		t.Error("a plugin whose hash is not the pinned one was run")
	}
}

// TestHungSourceCostsItsFamilies: a source that never answers (stat is a
// FIFO nobody writes) fails the collect at its deadline, but the families
// read before it were sent already and are served; the next collects find
// the plugin still stuck and fail at their deadline too, and after three in
// a row the host restarts the plugin.
func TestHungSourceCostsItsFamilies(t *testing.T) {
	h := startHost(t, setup{
		procfs: "proc-without-stat",
		config: "    timeout: 1s\n",
		prepare: func(t *testing.T, procfs string) {
			if err := syscall.Mkfifo(filepath.Join(procfs, "stat"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	})
	mfs := h.scrape()
	if got := value(mfs, "plexporter_plugin_scrape_success", "plugin", "pyexample"); got != 0 {
		t.Errorf("plexporter_plugin_scrape_success = %v, want 0 (stat never answered)", got)
	}
	if got := value(mfs, "pyexample_load_average", "window", "1m"); got != 1.25 {
		t.Errorf(`pyexample_load_average{window="1m"} = %v, want 1.25: loadavg's batch was sent before stat hung`, got)
	}
	h.waitFor(15*time.Second, "the host to restart the plugin after three timeouts", func() bool {
		h.TryScrape("")
		mfs, err := h.TryScrape("")
		return err == nil && value(mfs, "plexporter_plugin_restarts_total", "plugin", "pyexample") >= 1
	})
}

// TestSandboxConfinesThePlugin: the Python process is held to its
// manifest's paths. Its Landlock rules name the inodes the grants had at
// launch, so a stat file put in place afterwards (a new inode at the same
// path) is denied to the sandboxed plugin, and read by an unsandboxed one.
func TestSandboxConfinesThePlugin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	for _, sandboxed := range []bool{true, false} {
		t.Run(fmt.Sprintf("sandboxed=%v", sandboxed), func(t *testing.T) {
			s := setup{procfs: "proc"}
			if !sandboxed {
				s.flags = []string{"--no-plugin.sandbox"}
			}
			h := startHost(t, s)
			if v := value(h.scrape(), "pyexample_forks_total"); v != 54321 {
				t.Fatalf("pyexample_forks_total = %v, want 54321 (testdata/proc/stat)", v)
			}
			replacement := filepath.Join(h.procfs, "stat.new")
			if err := os.WriteFile(replacement, []byte("ctxt 1\nprocesses 99999\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(replacement, filepath.Join(h.procfs, "stat")); err != nil {
				t.Fatal(err)
			}
			mfs := h.scrape()
			forks := value(mfs, "pyexample_forks_total")
			denied := value(mfs, "plexporter_plugin_collect_errors_total", "plugin", "pyexample", "collector", "stat") >= 1
			switch {
			case sandboxed && (!denied || !math.IsNaN(forks)):
				t.Errorf("sandboxed: the replaced stat was read (pyexample_forks_total = %v, a stat error: %v), want it denied", forks, denied)
			case sandboxed:
				h.waitFor(5*time.Second, "the denial logged", func() bool {
					return containsLine(h.Logs(), "level=WARN", "pyexample", "stat: permission denied")
				})
			case !sandboxed && forks != 99999:
				t.Errorf("unsandboxed: pyexample_forks_total = %v, want 99999 from the replaced stat", forks)
			}
		})
	}
}

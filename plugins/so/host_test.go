//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/internal/testkit/hosttest"
)

// These tests run the real host with plexporter-so built as make build
// builds it (cgo, dynamically linked), each collector one plugin
// instance: plexporter-so installed under the name plexporter-so-<name>
// (a symlink) with its own manifest, as README.md tells operators to. As
// root every instance runs in its manifest's sandbox.

// soTree is a plugin directory with the host binary beside it.
type soTree struct {
	root, plugins, lib, host string
}

func newSOTree(t *testing.T) *soTree {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skipf("gcc is not installed (CI installs it): %v", err)
	}
	root := hosttest.TrustedDir(t, "plexporter-so", "plugins", "lib")
	st := &soTree{root: root, plugins: filepath.Join(root, "plugins"), lib: filepath.Join(root, "lib"), host: filepath.Join(root, "plexporter")}
	hosttest.Build(t,
		hosttest.Binary{Pkg: "../../host", Out: st.host},
		hosttest.Binary{Pkg: ".", Out: filepath.Join(st.plugins, "plexporter-so"), Cgo: true})
	return st
}

// install adds the instance so-<name> loading testdata/<name>.c, whose
// manifest grants the library directory plus extra (manifest YAML).
func (st *soTree) install(t *testing.T, name, extra string) (library string) {
	t.Helper()
	library = testSO(t, st.lib, name)
	link := filepath.Join(st.plugins, "plexporter-so-"+name)
	if err := os.Symlink("plexporter-so", link); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf("paths:\n  read_only: [%q]\n%s", st.lib, extra)
	writeFile(t, link+".yaml", manifest)
	return library
}

type soHost struct {
	t *testing.T
	*hosttest.Host
}

func (st *soTree) start(t *testing.T, pluginsYAML string) *soHost {
	t.Helper()
	return &soHost{t: t, Host: hosttest.Start(t, hosttest.Options{
		Binary: st.host, PluginDir: st.plugins, Config: "plugins:\n" + pluginsYAML,
		// A scrape timeout far above the hanging instance's 1s, so that
		// which of the two cut a scrape is plain however loaded the
		// machine is.
		Args:  []string{"--scrape.timeout=30s"},
		Ready: 60 * time.Second,
	})}
}

// scrape returns /metrics parsed, and how long it took to answer.
func (h *soHost) scrape() (map[string]*dto.MetricFamily, string, time.Duration) {
	h.t.Helper()
	start := time.Now()
	_, body, err := h.Fetch("/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	took := time.Since(start)
	return hosttest.Parse(h.t, body), body, took
}

// value is the value of the series of family with the given label pairs,
// or -1 when there is none.
func value(mfs map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	if v, ok := hosttest.Value(mfs, family, labels...); ok {
		return v
	}
	return -1
}

// rssBytes is a process's resident set size.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// One host, a good collector and four bad ones at once: each bad one costs
// its own instance only.
func TestBadCollectorsCostTheirInstanceOnly(t *testing.T) {
	st := newSOTree(t)
	good := st.install(t, "series", "")
	segv := st.install(t, "segv", "")
	hang := st.install(t, "hang", "")
	garbage := st.install(t, "garbage", "")
	// 64 MiB of limit: RLIMIT_DATA 192 MiB under the sandbox, of which
	// the cgo process uses about 90 MiB at rest (Go's arena reservations
	// and the threads' stacks, README.md), so a leak of 16 MiB per collect
	// reaches it within a few scrapes.
	leak := st.install(t, "leak", "limits: {memory: 64MiB}\n")
	h := st.start(t, fmt.Sprintf(`  so-series: {config: {library: %q, collector: {series: 3}}}
  so-segv: {config: {library: %q}}
  so-hang: {timeout: 1s, config: {library: %q}}
  so-garbage: {config: {library: %q}}
  so-leak: {config: {library: %q}}
`, good, segv, hang, garbage, leak))
	hostRSS := rssBytes(t, h.Pid())
	sandboxed := os.Geteuid() == 0

	restarted := func(mfs map[string]*dto.MetricFamily, plugin string) bool {
		return value(mfs, "plexporter_plugin_restarts_total", "plugin", plugin) >= 1
	}
	var (
		mfs     map[string]*dto.MetricFamily
		text    string
		slowest time.Duration
		scrapes int
		leaked  float64
	)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var took time.Duration
		mfs, text, took = h.scrape()
		scrapes++
		slowest = max(slowest, took)
		// The good collector is served on every scrape, whatever the others do.
		for i, s := range []string{"s0", "s1", "s2"} {
			if v := value(mfs, "test_series_value", "shard", "h"+strconv.Itoa(i), "series", s); v != float64(i) {
				t.Fatalf("scrape %d: test_series_value{series=%q} = %v, want %d:\n%s", scrapes, s, v, i, text)
			}
		}
		if value(mfs, "plexporter_plugin_up", "plugin", "so-series") != 1 || value(mfs, "plexporter_plugin_restarts_total", "plugin", "so-series") > 0 {
			t.Fatalf("scrape %d: so-series is not up or was restarted:\n%s", scrapes, text)
		}
		leaked = max(leaked, value(mfs, "leak_bytes"))
		done := restarted(mfs, "so-segv") && restarted(mfs, "so-hang") &&
			value(mfs, "plexporter_dropped_series_total", "plugin", "so-garbage", "reason", "invalid_histogram") >= 1
		if sandboxed {
			done = done && restarted(mfs, "so-leak")
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d scrapes in 60s the bad collectors were not all restarted and counted:\n%s", scrapes, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d scrapes, the slowest %v; the leaker reached %.0f MiB", scrapes, slowest, leaked/(1<<20))

	// The hang is cut at its instance's deadline (1s), not the scrape's
	// (30s): halfway between the two is a margin no load reaches.
	if slowest > 15*time.Second {
		t.Errorf("the slowest scrape took %v; the hanging collector's 1s timeout should bound it, not --scrape.timeout=30s", slowest)
	}
	if !strings.Contains(h.Logs(), "collect of "+hang+" has not returned since its deadline") {
		t.Errorf("the host log does not say the hanging collect was given up on")
	}
	// The crash's reason is in the "plugin down" line (ERROR: the default
	// log level shows it), not only "exit status 2".
	var segvDown []string
	for _, l := range strings.Split(h.Logs(), "\n") {
		if strings.Contains(l, "plugin down") && strings.Contains(l, "plugin=so-segv") {
			segvDown = append(segvDown, l)
		}
	}
	if len(segvDown) == 0 || !strings.Contains(segvDown[0], "SIGSEGV") || !strings.Contains(segvDown[0], "level=ERROR") {
		t.Errorf("the so-segv instance's plugin down lines do not name SIGSEGV at ERROR: %q", segvDown)
	}

	// The garbage is dropped by the host's guard and counted, what the
	// relay cannot even form is refused and counted, and the good sample
	// among it is served.
	for reason, want := range map[string]float64{"invalid_name": 1, "invalid_label_value": 2, "invalid_histogram": 1} {
		if got := value(mfs, "plexporter_dropped_series_total", "plugin", "so-garbage", "reason", reason); got < want {
			t.Errorf("plexporter_dropped_series_total{plugin=so-garbage,reason=%s} = %v, want >= %v", reason, got, want)
		}
	}
	if value(mfs, "garbage_ok", "device", "sda") != 1 {
		t.Errorf("garbage_ok{device=sda} is not served")
	}
	if got := value(mfs, "so_collection_errors_total", "collector", "garbage"); got < 1 {
		t.Errorf("so_collection_errors_total{collector=garbage} = %v, want >= 1 (three refused samples per collect)", got)
	}
	if value(mfs, "plexporter_plugin_collect_errors_total", "plugin", "so-garbage", "collector", "garbage") < 1 {
		t.Errorf("the host counts no partial error of so-garbage")
	}
	if !strings.Contains(h.Logs(), "refused 3 samples the collector emitted") {
		t.Errorf("the host log does not report the refused samples")
	}

	// The leaker is bounded by its own memory limit; the host's memory
	// does not follow it.
	if sandboxed {
		limit := float64(64<<20 + 128<<20) // RLIMIT_DATA
		if leaked > limit {
			t.Errorf("the leaker reported %.0f MiB, beyond its RLIMIT_DATA of %.0f MiB", leaked/(1<<20), limit/(1<<20))
		}
		if grown := rssBytes(t, h.Pid()) - hostRSS; grown > 32<<20 {
			t.Errorf("the host's RSS grew by %d MiB while the leaker leaked", grown>>20)
		}
	}
}

// plexporter plugin check, the conformance runner a vendor's CI uses,
// passes plexporter-so with the example C collector, in the instance's
// sandbox when run as root.
func TestConformanceWithTheExampleCollector(t *testing.T) {
	st := newSOTree(t)
	lib := buildSO(t, st.lib, "libplexporter_loadavg.so", []string{"../../sdk/cabi/examples/loadavg.c"})
	link := filepath.Join(st.plugins, "plexporter-so-loadavg")
	if err := os.Symlink("plexporter-so", link); err != nil {
		t.Fatal(err)
	}
	writeFile(t, link+".yaml", fmt.Sprintf("paths:\n  read_only: [%q, \"{procfs}/loadavg\"]\nlimits: {memory: 64MiB, nofile: 16}\n", st.lib))
	cfg := filepath.Join(st.root, "plexporter.yml")
	writeFile(t, cfg, fmt.Sprintf("plugins:\n  so-loadavg:\n    config: {library: %q, collector: {path: /proc/loadavg}}\n", lib))
	out, err := exec.Command(st.host, "plugin", "check", "--config.file="+cfg, link).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	verdict := lines[len(lines)-1]
	if err != nil || !strings.Contains(verdict, "conforms") {
		t.Fatalf("plexporter plugin check %s: %v\n%s", link, err, out)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "FAIL") {
			t.Errorf("%s", l)
		}
	}
	t.Log(verdict)
}

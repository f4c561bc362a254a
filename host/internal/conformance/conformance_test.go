package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

var (
	binDir      string // the shipped plugins, each with its manifest
	runtimeRoot string // for the plugins' socket directories
	misfitBin   string
)

var testLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

var shipped = []string{"rdma", "ethtool", "nfs", "nvme"}

func TestMain(m *testing.M) {
	// Sandboxed plugins are started through the host binary re-executed as
	// the launcher; in this package's tests that binary is the test itself.
	if len(os.Args) > 1 && os.Args[1] == sandbox.LaunchArg {
		sandbox.Launch()
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildArg {
		sandbox.LaunchChild()
	}
	dir, err := os.MkdirTemp("", "conformance-test")
	if err != nil {
		panic(err)
	}
	// Traversable by the sandboxed plugins' user.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	binDir = filepath.Join(dir, "plugins")
	runtimeRoot = filepath.Join(dir, "run")
	if err := os.Mkdir(runtimeRoot, 0o755); err != nil {
		panic(err)
	}
	if err := buildPlugins(binDir, nil, append([]string{"internal/testkit/testplugins/misfit"}, shipped...)...); err != nil {
		panic(err)
	}
	// The misfit is installed under many names, per test; not beside the
	// shipped plugins.
	misfitBin = filepath.Join(dir, "misfit")
	if err := os.Rename(filepath.Join(binDir, "plexporter-misfit"), misfitBin); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildPlugins builds the plugins at the module-relative package paths
// pkgs (plugins/<name> may be given as <name>) into dir in one go build, as
// plexporter-<base name>, each with its manifest if it has one.
func buildPlugins(dir string, tags []string, pkgs ...string) error {
	args := []string{"build", "-o", dir + "/"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	for _, p := range pkgs {
		if !strings.Contains(p, "/") {
			p = "plugins/" + p
		}
		args = append(args, "../../../"+p)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, p := range pkgs {
		name := filepath.Base(p)
		bin := filepath.Join(dir, "plexporter-"+name)
		if err := os.Rename(filepath.Join(dir, name), bin); err != nil {
			return err
		}
		manifest, err := os.ReadFile(filepath.Join("../../../plugins", name, "plexporter-"+name+".yaml"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(bin+".yaml", manifest, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// check runs the runner on binary as `plexporter plugin check` would, with
// config as --config.file (or none).
func check(t *testing.T, binary, config string, mode SandboxMode, edit func(*supervise.Settings)) *Report {
	t.Helper()
	rep, err := run(binary, config, mode, edit)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// run is check for goroutines other than the test's.
func run(binary, config string, mode SandboxMode, edit func(*supervise.Settings)) (*Report, error) {
	// Under the test's 0755 directory: a sandboxed plugin's user must reach
	// its socket directory (t.TempDir's parent is 0700).
	runtimeDir, err := os.MkdirTemp(runtimeRoot, "run")
	if err == nil {
		err = os.Chmod(runtimeDir, 0o755)
	}
	if err != nil {
		return nil, err
	}
	opts := fleet.Options{
		ConfigFile: config,
		Defaults: supervise.Settings{
			Timeout:      5 * time.Second,
			StartTimeout: 10 * time.Second,
			Paths:        &pluginv1.Paths{Sysfs: "/sys", Procfs: "/proc", Rootfs: "/"},
			MaxSeries:    100000,
			SocketParent: runtimeDir,
		},
	}
	if edit != nil {
		edit(&opts.Defaults)
	}
	rep, err := Run(Options{
		Binary:  binary,
		Sandbox: mode,
		Settings: func(p discover.Plugin, sandboxed bool) (supervise.Settings, []string, error) {
			o := opts
			o.Sandbox = sandboxed
			return fleet.New(o, testLog).SettingsFor(p)
		},
		SandboxWorks:     sandbox.CheckHost,
		MaxLabelValueLen: 4096,
		ReservedPrefixes: guard.HostPrefixes(),
		Log:              testLog,
	})
	if err != nil {
		return nil, err
	}
	if len(rep.Results) != len(Rules) {
		return nil, fmt.Errorf("%d results for %d rules", len(rep.Results), len(Rules))
	}
	return rep, nil
}

func text(rep *Report) string {
	var b bytes.Buffer
	rep.WriteText(&b)
	return b.String()
}

// withStatus lists the rules with status st.
func withStatus(rep *Report, st Status) []string {
	var out []string
	for _, r := range rep.Results {
		if r.Status == st {
			out = append(out, r.Rule)
		}
	}
	return out
}

// Every shipped plugin conforms on this machine, which has none of their
// hardware: what they send is their error counters, and the rules that need
// data judge those.
func TestShippedPluginsConform(t *testing.T) {
	modes := []SandboxMode{SandboxOff}
	if os.Geteuid() == 0 {
		if err := sandbox.CheckHost(); err != nil {
			t.Logf("sandboxed runs skipped: %v", err)
		} else {
			modes = append(modes, SandboxOn)
		}
	}
	for _, mode := range modes {
		for _, p := range shipped {
			t.Run(p+"/sandbox="+string(mode), func(t *testing.T) {
				rep := check(t, filepath.Join(binDir, "plexporter-"+p), "testdata/plugins.yml", mode, nil)
				out := text(rep)
				if !rep.OK() {
					t.Fatalf("does not conform:\n%s", out)
				}
				want := "unconfined"
				if mode == SandboxOn {
					want = "sandboxed by " + filepath.Join(binDir, "plexporter-"+p+".yaml")
				}
				if rep.Mode != want || !strings.Contains(out, "("+want+")\n") {
					t.Errorf("mode %q, want %q:\n%s", rep.Mode, want, out)
				}
				// The config file names a key, so the wrong type is tried.
				if r, _ := rep.Result("configure.wrong-type"); r.Status != Pass {
					t.Errorf("configure.wrong-type: %+v", r)
				}
				if r, _ := rep.Result("handshake.cookie"); (r.Status == Skip) != (mode == SandboxOn) {
					t.Errorf("handshake.cookie in mode %s: %+v", mode, r)
				}
			})
		}
	}
}

// misfit installs the misfit test plugin as plexporter-misfit[-fault],
// with a config section naming its one key.
func misfit(t *testing.T, fault string) (binary, config string) {
	t.Helper()
	dir := t.TempDir()
	name := "misfit"
	if fault != "" {
		name += "-" + fault
	}
	binary = filepath.Join(dir, "plexporter-"+name)
	if err := os.Symlink(misfitBin, binary); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "plugins:\n  %s:\n    config: {series: 2}\n", name), 0o600); err != nil {
		t.Fatal(err)
	}
	return binary, config
}

// Each fault of the misfit plugin fails the rule it breaks and no other;
// the misfit without a fault passes every rule, so each FAIL below is the
// fault's doing.
func TestEachFaultFailsItsRule(t *testing.T) {
	var afterHandshake []string
	for i, r := range Rules {
		if i > slices.IndexFunc(Rules, func(r Rule) bool { return r.ID == "handshake" }) {
			afterHandshake = append(afterHandshake, r.ID)
		}
	}
	cases := []struct {
		fault string
		fails []string
		// skips are rules that cannot be judged after the fault
		skips []string
		short bool // run with a 1s collect timeout, to keep a hang short
	}{
		{fault: "", fails: nil},
		{fault: "nocookie", fails: []string{"handshake.cookie"}},
		{fault: "badproto", fails: []string{"handshake"}, skips: afterHandshake},
		{fault: "badname", fails: []string{"info.name"}},
		{fault: "noversion", fails: []string{"info.version"}},
		{fault: "badcatalog", fails: []string{"info.catalogue"}},
		{fault: "configcrash", fails: []string{"configure.unknown-key"}},
		{fault: "laxtypes", fails: []string{"configure.wrong-type"}},
		{fault: "hang", fails: []string{"collect"}, short: true,
			skips: []string{"collect.guard", "collect.duplicates", "collect.catalogue", "collect.stable", "collect.cancel", "allowlist.one", "allowlist.none", "metric-prefix", "allowlist.prefixed"}},
		{fault: "badvalue", fails: []string{"collect.guard"}},
		{fault: "duplicate", fails: []string{"collect.duplicates"}},
		{fault: "undeclared", fails: []string{"collect.catalogue"}},
		{fault: "growing", fails: []string{"collect.stable"}},
		{fault: "nocancel", fails: []string{"collect.cancel"}},
		{fault: "noallowlist", fails: []string{"allowlist.one", "allowlist.none", "allowlist.prefixed"}},
		{fault: "noprefix", fails: []string{"metric-prefix"}, skips: []string{"allowlist.prefixed"}},
		{fault: "bareallow", fails: []string{"allowlist.prefixed"}},
		{fault: "dies", fails: []string{"process.up"}, skips: []string{"lifeline"}},
		{fault: "nostop", fails: []string{"stop"}},
		{fault: "nolifeline", fails: []string{"lifeline"}},
	}
	// Most of a faulty plugin's run is waiting for a deadline: run them all
	// at once (t.Parallel would run only GOMAXPROCS at a time).
	reports, errs := make([]*Report, len(cases)), make([]error, len(cases))
	var wg sync.WaitGroup
	for i, tc := range cases {
		binary, config := misfit(t, tc.fault)
		var edit func(*supervise.Settings)
		if tc.short {
			edit = func(s *supervise.Settings) { s.Timeout = time.Second }
		}
		wg.Go(func() { reports[i], errs[i] = run(binary, config, SandboxOff, edit) })
	}
	wg.Wait()
	for i, tc := range cases {
		t.Run("fault="+tc.fault, func(t *testing.T) {
			rep := reports[i]
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			out := text(rep)
			if got := withStatus(rep, Fail); !slices.Equal(got, tc.fails) {
				t.Errorf("FAIL %v, want %v:\n%s", got, tc.fails, out)
			}
			if got := withStatus(rep, Skip); !slices.Equal(got, tc.skips) {
				t.Errorf("SKIP %v, want %v:\n%s", got, tc.skips, out)
			}
			if rep.OK() != (len(tc.fails) == 0) {
				t.Errorf("OK() = %v with %d failures", rep.OK(), rep.Failed)
			}
		})
	}
}

// A file the host would not run fails binary.name and nothing else runs.
func TestBadFileName(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "plexporter-Misfit")
	if err := os.Symlink(misfitBin, binary); err != nil {
		t.Fatal(err)
	}
	rep := check(t, binary, "", SandboxOff, nil)
	if got := withStatus(rep, Fail); !slices.Equal(got, []string{"binary.name"}) || rep.Passed != 0 {
		t.Fatalf("FAIL %v, %d passed:\n%s", got, rep.Passed, text(rep))
	}
	if r, _ := rep.Result("binary.name"); !strings.Contains(r.Detail, `"Misfit" does not match`) {
		t.Errorf("binary.name: %+v", r)
	}
}

// Without a config section the runner knows no key to get the type of
// wrong, and says so rather than passing.
func TestWrongTypeNeedsAKey(t *testing.T) {
	binary, _ := misfit(t, "")
	rep := check(t, binary, "", SandboxOff, nil)
	r, _ := rep.Result("configure.wrong-type")
	if r.Status != Skip || !strings.Contains(r.Detail, "give --config with a section for plugins.misfit.config") {
		t.Errorf("configure.wrong-type: %+v", r)
	}
	if got := withStatus(rep, Fail); len(got) != 0 {
		t.Errorf("FAIL %v:\n%s", got, text(rep))
	}
}

// The text report: one `STATUS rule what[: detail]` line per rule, in the
// rules' order, between a header naming the mode and a summary.
func TestTextReport(t *testing.T) {
	rep := &Report{Binary: "/x/plexporter-demo", Plugin: "demo", Mode: "unconfined"}
	rep.add(Result{Rule: "handshake", What: "handshake", Status: Pass, Detail: "in 3ms"})
	rep.add(Result{Rule: "collect", What: "Collect", Status: Fail, Detail: "two\nlines"})
	rep.add(Result{Rule: "lifeline", What: "lifeline", Status: Skip})
	want := "checking /x/plexporter-demo (unconfined)\n" +
		"PASS handshake handshake: in 3ms\n" +
		"FAIL collect Collect: two lines\n" +
		"SKIP lifeline lifeline\n" +
		"/x/plexporter-demo: does not conform: 1 passed, 1 failed, 1 skipped (unconfined)\n"
	if got := text(rep); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if rep.OK() {
		t.Error("a report with a FAIL is OK")
	}
}

// docs/plugin-protocol.md's conformance checklist lists the runner's rules,
// by ID and in order, with the checklist items each checks: the doc and the
// runner cannot drift apart.
func TestRulesMatchTheProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/plugin-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### The runner's rules")
	if !ok {
		t.Fatal("docs/plugin-protocol.md has no \"### The runner's rules\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z.-]+)` \\| ([0-9, –]+) \\|")
	var got []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var items []string
		for _, item := range strings.Split(m[2], ",") {
			item = strings.TrimSpace(item)
			from, to, isRange := strings.Cut(item, "–") // 22–30
			if !isRange {
				items = append(items, item)
				continue
			}
			a, _ := strconv.Atoi(from)
			b, _ := strconv.Atoi(to)
			for n := a; n <= b; n++ {
				items = append(items, strconv.Itoa(n))
			}
		}
		got = append(got, m[1]+" "+strings.Join(items, ","))
	}
	var want []string
	for _, r := range Rules {
		items := make([]string, len(r.Checklist))
		for i, n := range r.Checklist {
			items[i] = fmt.Sprint(n)
		}
		want = append(want, r.ID+" "+strings.Join(items, ","))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the doc's table lists\n%s\nthe runner has\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

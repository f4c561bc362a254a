package sdktest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/fixture"
)

// Unpack extracts a fixture archive (for example a sysfs layout) into a
// fresh temporary directory and returns that directory. The archive is a
// text archive (testdata/<case>.ttar, whose roots are sys/ and proc/: point
// Options.Sysfs at root+"/sys") or, until every plugin is converted, a tar
// file; see sdk/fixture.
func Unpack(t testing.TB, path string) string {
	t.Helper()
	root := t.TempDir()
	if err := fixture.Unpack(path, root); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return root
}

// UnpackSysfs extracts a fixture archive as Unpack does and returns the
// sysfs root inside it (root+"/sys"), for tests whose plugin reads only
// sysfs: sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/<case>.ttar")}.
func UnpackSysfs(t testing.TB, path string) string {
	t.Helper()
	return filepath.Join(Unpack(t, path), "sys")
}

// CleanGolden is the check of a scrape that must succeed, from Run or
// Collect: it fails the test on a stream error or any partial error, then
// compares the exposition with the golden file (see Golden) and returns
// the exposition. The caller lints it, since what a plugin must pass
// (Promtool, Lint) and may keep (seed-compatible names) is its own.
//
//	text := sdktest.CleanGolden(t, sdktest.Run(t, p, opts), "testdata/<case>.golden")
func CleanGolden(t testing.TB, res *Result, golden string) string {
	t.Helper()
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v, errors %v", res.Status, res.Errors)
	}
	text := res.Text(t)
	Golden(t, text, golden)
	return text
}

// Contains fails the test for each of want that the exposition text lacks;
// a want is a substring, a whole sample line or a prefix of one
// (`name{label="v"`).
func Contains(t testing.TB, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("exposition lacks %s", w)
		}
	}
}

// Lacks fails the test for each of absent that the exposition text has.
func Lacks(t testing.TB, text string, absent ...string) {
	t.Helper()
	for _, a := range absent {
		if strings.Contains(text, a) {
			t.Errorf("exposition has %s", a)
		}
	}
}

// UnpackTar extracts a fixture tree from a tar file, as Unpack does.
//
// Deprecated: use Unpack; fixtures are text archives (.ttar).
func UnpackTar(t testing.TB, path string) string {
	t.Helper()
	return Unpack(t, path)
}

// PromtoolBinary returns the path of promtool; see PrometheusBinary.
func PromtoolBinary(t testing.TB) string {
	t.Helper()
	return PrometheusBinary(t, "promtool")
}

// PrometheusBinary returns the path of a program of the prometheus
// distribution (Debian package prometheus: promtool, prometheus). Without it
// on PATH the test is skipped, unless PLEXPORTER_REQUIRE_PROMTOOL is set (CI
// sets it), then it fails.
func PrometheusBinary(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("PLEXPORTER_REQUIRE_PROMTOOL") != "" {
			t.Fatalf("%s not found but PLEXPORTER_REQUIRE_PROMTOOL is set (Debian package prometheus)", name)
		}
		t.Skipf("%s not installed (Debian package prometheus)", name)
	}
	return bin
}

// Promtool runs `promtool check metrics` on an exposition and fails the test
// on any error line it prints (lint warnings are returned for the caller to
// judge).
func Promtool(t testing.TB, text string) (warnings string) {
	t.Helper()
	cmd := exec.Command(PromtoolBinary(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// promtool exits 3 for lint problems only, 1 for parse errors.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("promtool check metrics: %v\n%s", err, out)
		}
	}
	return string(out)
}

// PromtoolClean runs `promtool check metrics` on an exposition and fails
// the test on every finding except those about a metric named in allowed.
// allowed maps a metric name to why it keeps a name promtool objects to
// (always a seed exporter's name that dashboards and alerts query); each
// plugin lists its exceptions in one place and passes nil if it has none.
func PromtoolClean(t testing.TB, text string, allowed map[string]string) {
	t.Helper()
	for _, line := range strings.Split(Promtool(t, text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, " ") // "<metric> <finding>"
		if _, ok := allowed[name]; !ok {
			t.Errorf("promtool check metrics: %s", line)
		}
	}
}

// PromtoolTestRules runs `promtool test rules` on unit-test files in dir
// (the paths in them are relative to dir, as promtool reads them) and fails
// the test on any failed case, with promtool's report.
func PromtoolTestRules(t testing.TB, dir string, files ...string) {
	t.Helper()
	cmd := exec.Command(PromtoolBinary(t), append([]string{"test", "rules"}, files...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules %v in %s: %v\n%s", files, dir, err, out)
	}
}

// PromtoolRules runs `promtool check rules` on rule files and fails the
// test on any problem.
func PromtoolRules(t testing.TB, files ...string) {
	t.Helper()
	out, err := exec.Command(PromtoolBinary(t), append([]string{"check", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %v: %v\n%s", files, err, out)
	}
}

package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// plexporter-so with a library whose collect never returns gives up on it
// at the deadline and fails that Collect (ABORTED: the library failed as a
// whole, so the scrape must not read as a success), then exits, so that the
// host restarts it. collect and process.up fail; the rules that need a
// first Collect are skipped, and lifeline finds the process gone.
// The collect timeout is 10 s, not 1 s: the plugin answers in the last
// twentieth of the deadline, and 50 ms was missed once at load 13 (the
// collect then ended DeadlineExceeded with no answer at all).
func TestHangingSharedObjectFailsProcessUp(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: plexporter-so needs cgo, the hanging library a C compiler")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "plexporter-so"), "../../../plugins/so")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build plugins/so: %v\n%s", err, out)
	}
	lib := filepath.Join(dir, "libhang.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-I../../../sdk/cabi", "-I../../../plugins/so/testdata",
		"-o", lib, "../../../plugins/so/testdata/hang.c").CombinedOutput(); err != nil {
		t.Fatalf("%s hang.c: %v\n%s", cc, err, out)
	}
	binary := filepath.Join(dir, "plexporter-so-hang")
	if err := os.Symlink("plexporter-so", binary); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "plugins:\n  so-hang:\n    timeout: 10s\n    config: {library: %q}\n", lib), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := check(t, binary, config, SandboxOff, nil)
	if got := withStatus(rep, Fail); !slices.Equal(got, []string{"collect", "process.up"}) {
		t.Errorf("FAIL %v, want [collect process.up]:\n%s", got, text(rep))
	}
	wantSkip := []string{"collect.stable", "collect.cancel", "allowlist.one", "allowlist.none", "metric-prefix", "allowlist.prefixed", "lifeline"}
	if got := withStatus(rep, Skip); !slices.Equal(got, wantSkip) {
		t.Errorf("SKIP %v, want %v:\n%s", got, wantSkip, text(rep))
	}
}

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `plexporter plugin check` as a vendor's CI runs it: the exit status says
// whether the plugin conforms, --format=json is the same report.
func TestPluginCheckCommand(t *testing.T) {
	bin := filepath.Join(binDir, "plexporter")
	run := func(args ...string) (string, int) {
		out, err := exec.Command(bin, append([]string{"plugin", "check", "--log.level=warn"}, args...)...).Output()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatal(err)
		return "", -1
	}

	out, code := run("--format=json", "--sandbox=off", filepath.Join(binDir, "shipped", "plexporter-nfs"))
	var rep struct {
		Plugin, Mode string
		Results      []struct{ Rule, Status, Detail string }
		Failed       int
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--format=json: %v:\n%s", err, out)
	}
	if code != 0 || rep.Failed != 0 || rep.Plugin != "nfs" || rep.Mode != "unconfined" || len(rep.Results) < 20 {
		t.Errorf("nfs: exit status %d, %+v", code, rep)
	}

	out, code = run(filepath.Join(binDir, "shipped", "plexporter-none"))
	if code != 1 || !strings.HasPrefix(out, "checking ") || !strings.Contains(out, "FAIL binary.name ") || !strings.Contains(out, "does not conform: 0 passed, 1 failed") {
		t.Errorf("a missing plugin: exit status %d:\n%s", code, out)
	}

	if _, code = run("--sandbox=sometimes", filepath.Join(binDir, "shipped", "plexporter-nfs")); code != 2 {
		t.Errorf("a bad flag: exit status %d, want 2", code)
	}
}

// Issue 28 item 6: `plugin check` run as root on a binary without a
// manifest ran it unconfined, as root, where the host would give it the
// no-grant sandbox. The probe installed as plexporter-escape writes a
// marker beside itself as it starts, which only an unconfined root can; by
// default (--sandbox=auto) it must run sandboxed and fail to, and with
// --sandbox=off it writes it (so the test can fail).
func TestPluginCheckSandboxesWithoutManifest(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	dir, err := os.MkdirTemp("", "plexporter-check")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the plugin user reaches its binary
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "plexporter-escape")
	copyFile(t, filepath.Join(binDir, "probe"), plugin, 0o755)
	marker := plugin + ".escaped"
	check := func(args ...string) string {
		t.Helper()
		args = append([]string{"plugin", "check", "--format=json", "--log.level=warn"}, append(args, plugin)...)
		out, _ := exec.Command(filepath.Join(binDir, "plexporter"), args...).Output() // exit status: the probe's conformance, not this test's
		var rep struct{ Mode string }
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("plugin check %v: %v:\n%s", args, err, out)
		}
		return rep.Mode
	}

	if mode := check(); mode != "sandboxed, no manifest: no grants" {
		t.Errorf("plugin check as root without a manifest: mode %q, want the no-grant sandbox", mode)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("plugin check ran the plugin unconfined: it wrote %s (euid %s)", marker, strings.TrimSpace(string(b)))
	}

	if mode := check("--sandbox=off"); mode != "unconfined" {
		t.Errorf("--sandbox=off: mode %q", mode)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("--sandbox=off: the unconfined probe did not write its marker (%v), so the test proves nothing", err)
	}
}

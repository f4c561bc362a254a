package main

import (
	"encoding/json"
	"errors"
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

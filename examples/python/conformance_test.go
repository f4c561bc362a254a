package python

// `plexporter plugin check` on the packed plugin, as a vendor's CI runs it:
// in its manifest's sandbox (as root) and unconfined, with a config section
// so that the runner also tries a known key with the wrong type.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestConformance(t *testing.T) {
	requirePython(t)
	if err := buildOnce(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "plexporter-python-check")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the plugin's user reaches its file
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plexporter-pyexample")
	copyFile(t, filepath.Join(binDir, "plexporter-pyexample"), bin, 0o755)
	copyFile(t, "plexporter-pyexample.yaml", bin+".yaml", 0o644)
	cfg := filepath.Join(dir, "plexporter.yml")
	if err := os.WriteFile(cfg, []byte("plugins:\n  pyexample:\n    config: {load_windows: [1m, 15m]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"auto", "off"} {
		t.Run("sandbox="+mode, func(t *testing.T) {
			out, err := exec.Command(filepath.Join(binDir, "plexporter"), "plugin", "check", "--log.level=warn", "--sandbox="+mode, "--config="+cfg, bin).CombinedOutput()
			report := string(out)
			if err != nil {
				t.Fatalf("plexporter plugin check --sandbox=%s: %v, want exit status 0:\n%s", mode, err, report)
			}
			if !strings.Contains(report, "conforms") {
				t.Errorf("no verdict in the report:\n%s", report)
			}
			for _, line := range strings.Split(report, "\n") {
				if strings.HasPrefix(line, "FAIL ") {
					t.Errorf("a failed rule with exit status 0: %s", line)
				}
			}
			if sandboxed := strings.Contains(report, "sandboxed by "+bin+".yaml"); sandboxed != (mode == "auto" && os.Geteuid() == 0) {
				t.Errorf("sandboxed = %v with --sandbox=%s as uid %d:\n%s", sandboxed, mode, os.Geteuid(), report)
			}
			t.Logf("%s", report)
		})
	}
}

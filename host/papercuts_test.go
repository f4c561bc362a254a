package main

// Tests of the papercuts of issue 13 item 9, on the built binary.

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionGoesToStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--version: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "plexporter, version ") || stderr.Len() != 0 {
		t.Fatalf("--version: stdout %q, stderr %q; want the version on stdout only", stdout.String(), stderr.String())
	}
}

func TestBadDurationFlagShowsAGoodOne(t *testing.T) {
	for _, args := range [][]string{{"--scrape.timeout=5"}, {"--plugin.start-timeout=soon"}} {
		out, err := exec.Command(filepath.Join(binDir, "plexporter"), append(args, "--plugin.dir=/nonexistent", "metrics")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "want a Go duration such as 500ms, 5s or 1m30s") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir=/nonexistent", "metrics")
	cmd.Env = append(cmd.Environ(), "PLEXPORTER_SCRAPE_TIMEOUT=1m30s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("a good duration from the environment: %v\n%s", err, out)
	}
}

func TestAllowlistNeverHidesHostHealth(t *testing.T) {
	t.Setenv("PLEXPORTER_ENABLED_METRICS", "chaos_value")
	t.Setenv("PLEXPORTER_DISABLED_METRICS", "plexporter_plugin_info")
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 2}}\n")
	_, mfs := h.scrape("")
	for _, name := range []string{"chaos_value", "plexporter_plugin_up", "plexporter_plugin_scrape_success", "plexporter_build_info"} {
		if len(mfs[name].GetMetric()) == 0 {
			t.Errorf("%s missing under an allowlist of chaos_value; families = %v", name, keys(mfs))
		}
	}
	for name := range mfs {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || name == "chaos_shared" {
			t.Errorf("%s is not on the allowlist", name)
		}
	}
	if _, ok := mfs["plexporter_plugin_info"]; ok {
		t.Error("plexporter_plugin_info is on the denylist: an explicit denial still hides a health family")
	}
}

func TestSelectionOfAnUnknownPluginIs400(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"alpha", "broken", "off"} {
		if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "plexporter-broken.yaml"), []byte("capabilties: []\n"), 0o644)
	h := startHostIn(t, dir, "  off: {enabled: false}\n")
	for _, q := range []string{"?collect[]=alpha", "?collect[]=broken", "?exclude[]=off", "?collect[]=alpha&exclude[]=broken"} {
		h.scrape(q) // fails the test unless 200: refused and disabled plugins are known
	}
	for _, q := range []string{"?collect[]=nosuch", "?exclude[]=nosuch", "?collect[]=alpha,nosuch"} {
		resp, err := http.Get(h.url + "/metrics" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "nosuch") || !strings.Contains(string(body), "known plugins: alpha, broken, off") {
			t.Errorf("%s: %d %s; want 400 naming nosuch and the known plugins", q, resp.StatusCode, body)
		}
	}
}

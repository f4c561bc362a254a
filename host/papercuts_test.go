package main

// Tests of the papercuts of issue 13 item 9, on the built binary.

import (
	"bytes"
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

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

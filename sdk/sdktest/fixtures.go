package sdktest

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// UnpackTar extracts a fixture tree (for example a sysfs layout) from a tar
// file into a fresh temporary directory and returns that directory.
//
// Fixture trees live in tar files because sysfs names contain ':' (PCI
// addresses), which Go module archives refuse: a plain tree in testdata/
// would break `go get` of the SDK for every vendor. Symlinks are kept.
func UnpackTar(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	defer f.Close()
	root := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatalf("fixture %s: %v", path, err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			t.Fatalf("fixture %s: entry %q escapes the tree", path, h.Name)
		}
		dst := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, dst)
		case tar.TypeReg:
			var out *os.File
			if out, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777|0o200); err == nil {
				_, err = io.Copy(out, tr)
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
		}
		if err != nil {
			t.Fatalf("fixture %s: %s: %v", path, h.Name, err)
		}
	}
}

// PromtoolBinary returns the path of promtool. Without promtool on PATH the
// test is skipped, unless PLEXPORTER_REQUIRE_PROMTOOL is set (CI sets it),
// then it fails.
func PromtoolBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("PLEXPORTER_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found but PLEXPORTER_REQUIRE_PROMTOOL is set")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
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

// PromtoolRules runs `promtool check rules` on rule files and fails the
// test on any problem.
func PromtoolRules(t testing.TB, files ...string) {
	t.Helper()
	out, err := exec.Command(PromtoolBinary(t), append([]string{"check", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %v: %v\n%s", files, err, out)
	}
}

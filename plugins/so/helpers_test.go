package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildSO compiles a collector from C sources (testdata/ or the SDK's
// examples) with gcc into dir, as a vendor would, and returns the path.
func buildSO(t testing.TB, dir, name string, srcs []string, flags ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("gcc is not installed (CI installs it): %v", err)
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I../../sdk/cabi", "-o", out}, flags...)
	cmd := exec.Command(gcc, append(args, srcs...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// testSO builds testdata/<name>.c.
func testSO(t testing.TB, dir, name string, flags ...string) string {
	t.Helper()
	return buildSO(t, dir, name+".so", []string{filepath.Join("testdata", name+".c")}, flags...)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

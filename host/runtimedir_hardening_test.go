package main

// The plugins' socket directories live in a runtime directory, one
// subdirectory per host instance, and a host that was killed leaves
// nothing behind for long: the next one removes what it left.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// instanceDirs lists the host-<pid>-<start> directories in base.
func instanceDirs(t *testing.T, base string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(base, "host-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// shortTempDir is a temporary directory with a short path: t.TempDir's
// are named after the test, too long to hold a unix socket three levels
// down.
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestSocketDirectoriesLiveInTheRuntimeDirectory(t *testing.T) {
	tmp := t.TempDir()
	runtimeDir := shortTempDir(t) // a socket's path must fit in 107 bytes
	// As systemd starts the unit: RuntimeDirectory= sets $RUNTIME_DIRECTORY.
	t.Setenv("TMPDIR", tmp)
	t.Setenv("RUNTIME_DIRECTORY", runtimeDir)
	h := startHost(t, []string{"alpha", "beta"}, "")
	if leaked, _ := filepath.Glob(filepath.Join(tmp, "plugin-dir*")); len(leaked) != 0 {
		t.Errorf("socket directories in $TMPDIR: %v", leaked)
	}
	dirs := instanceDirs(t, runtimeDir)
	if len(dirs) != 1 {
		t.Fatalf("instance directories in $RUNTIME_DIRECTORY: %v", dirs)
	}
	sockets, _ := filepath.Glob(filepath.Join(dirs[0], "plugin-dir*", "plugin*"))
	if len(sockets) != 2 {
		out, _ := exec.Command("ls", "-laR", dirs[0]).CombinedOutput()
		t.Errorf("want the two plugins' sockets in %s, got %v\n%s", dirs[0], sockets, out)
	}

	// SIGKILL: the host cannot clean up; the next host does.
	h.cmd.Process.Kill()
	h.cmd.Wait()
	if len(instanceDirs(t, runtimeDir)) != 1 {
		t.Fatal("a killed host cannot remove its own directory; the test expects it left")
	}
	unrelated := filepath.Join(runtimeDir, "unrelated")
	os.Mkdir(unrelated, 0o700)
	next := startHostIn(t, h.dir, "")
	dirs = instanceDirs(t, runtimeDir)
	if len(dirs) != 1 || strings.Contains(dirs[0], "-"+strconv.Itoa(h.cmd.Process.Pid)+"-") {
		t.Errorf("after the next start: %v, want only the new host's", dirs)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Error("the next host removed a directory it did not make")
	}
	if !strings.Contains(next.logs.String(), "removed the socket directory of a host that is gone") {
		t.Error("the cleanup is not logged")
	}

	// A clean stop removes the host's own directory.
	next.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- next.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(minWait):
		t.Fatal("the host did not stop")
	}
	if dirs := instanceDirs(t, runtimeDir); len(dirs) != 0 {
		t.Errorf("a host that stopped cleanly left %v", dirs)
	}
}

// An explicit --plugin.runtime-dir wins; a shared one, or one too long for
// a socket path, is refused.
func TestRuntimeDirFlag(t *testing.T) {
	runtimeDir := filepath.Join(shortTempDir(t), "rt")
	t.Setenv("RUNTIME_DIRECTORY", shortTempDir(t))
	startHost(t, []string{"alpha"}, "", "--plugin.runtime-dir="+runtimeDir)
	if len(instanceDirs(t, runtimeDir)) != 1 {
		t.Errorf("no instance directory in --plugin.runtime-dir %s", runtimeDir)
	}

	open := filepath.Join(shortTempDir(t), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777|os.ModeSticky) // shared, like /tmp
	out, err := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+t.TempDir(), "--plugin.runtime-dir="+open, "--web.listen-address="+freePort(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "writable by nobody else") {
		t.Errorf("a shared runtime directory: %v\n%s", err, out)
	}
	long := filepath.Join(shortTempDir(t), strings.Repeat("x", 60))
	out, err = exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+t.TempDir(), "--plugin.runtime-dir="+long, "--web.listen-address="+freePort(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "too long") {
		t.Errorf("a runtime directory too long for unix sockets: %v\n%s", err, out)
	}
}

package launch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRuntimeBase(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		euid int
		want string
	}{
		{map[string]string{"RUNTIME_DIRECTORY": "/run/plexporter-unit:/run/other", "XDG_RUNTIME_DIR": "/run/user/0"}, 0, "/run/plexporter-unit"},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"}, 0, "/run/plexporter"},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "TMPDIR": "/var/tmp"}, 1000, "/run/user/1000/plexporter"},
		{map[string]string{"TMPDIR": "/var/tmp"}, 1000, "/var/tmp/plexporter-1000"},
		{nil, 1000, "/tmp/plexporter-1000"},
	} {
		if got := runtimeBase(func(k string) string { return tc.env[k] }, tc.euid); got != tc.want {
			t.Errorf("env %v, euid %d: %s, want %s", tc.env, tc.euid, got, tc.want)
		}
	}
}

// shortTempDir is a temporary directory with a path short enough for
// unix sockets three levels down (t.TempDir's are named after the test).
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// At start only the instance directories of hosts that are gone are
// removed: named by the scheme, real directories, owned by the host's user,
// whose pid is gone or now another process.
func TestOpenRuntimeDirRemovesOnlyStaleInstances(t *testing.T) {
	base := shortTempDir(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), nil, 0o644)
	parent := os.Getppid()
	parentStart, err := processStart(parent)
	if err != nil {
		t.Fatal(err)
	}
	dead := deadPID(t)
	mkdir := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(p, "plugin-dir1"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := []string{
		mkdir(fmt.Sprintf("host-%d-123", dead)),                 // its host is gone
		mkdir(fmt.Sprintf("host-%d-%d", parent, parentStart+1)), // the pid now runs another process
	}
	kept := []string{
		mkdir(fmt.Sprintf("host-%d-%d", parent, parentStart)), // a host that runs
		mkdir("plugin-dir42"), // not ours
		mkdir("host-x-1"),
	}
	link := filepath.Join(base, "host-1-1")
	os.Symlink(outside, link)
	file := filepath.Join(base, "host-2-2")
	os.WriteFile(file, nil, 0o644)
	kept = append(kept, link, file)
	if os.Geteuid() == 0 {
		foreign := mkdir(fmt.Sprintf("host-%d-7", dead))
		os.Chown(foreign, 65534, 65534)
		kept = append(kept, foreign)
	}

	rt, err := OpenRuntimeDir(base, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gone {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Error("a symlink's target was touched")
	}
	fi, err := os.Lstat(rt.Path)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o711 || filepath.Dir(rt.Path) != base || !instanceName.MatchString(filepath.Base(rt.Path)) {
		t.Fatalf("instance directory %s: %v %v", rt.Path, fi.Mode(), err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(rt.Path); err == nil {
		t.Error("Close left the instance directory")
	}
}

func TestOpenRuntimeDirRefusesWhatOthersMayWrite(t *testing.T) {
	// The host's own directory, world-writable (a Kubernetes emptyDir):
	// made private before anything goes in.
	base := filepath.Join(shortTempDir(t), "rt")
	os.Mkdir(base, 0o777)
	os.Chmod(base, 0o777)
	rt, err := OpenRuntimeDir(base, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	if fi, _ := os.Stat(base); fi.Mode().Perm() != 0o755 {
		t.Errorf("a world-writable base of the host's own: mode %v, want 0755", fi.Mode())
	}
	// A shared sticky directory is not the host's to change.
	shared := filepath.Join(shortTempDir(t), "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777|os.ModeSticky)
	_, err = OpenRuntimeDir(shared, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "writable by nobody else") || !strings.Contains(err.Error(), "--plugin.runtime-dir") {
		t.Fatalf("a shared sticky base: %v", err)
	}
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o777 {
		t.Error("the host changed a shared directory's mode")
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(shortTempDir(t), "foreign")
		os.Mkdir(foreign, 0o755)
		os.Chown(foreign, 65534, 65534)
		if _, err := OpenRuntimeDir(foreign, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "owner 65534") {
			t.Fatalf("a base of another user: %v", err)
		}
	}
	parent := filepath.Join(shortTempDir(t), "open")
	os.Mkdir(parent, 0o777)
	os.Chmod(parent, 0o777)
	if _, err := OpenRuntimeDir(filepath.Join(parent, "rt"), slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a base below a world-writable directory was accepted")
	}
	long := filepath.Join(shortTempDir(t), strings.Repeat("x", 60))
	if _, err := OpenRuntimeDir(long, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("a base too long for a plugin's socket: %v", err)
	}
}

// dial connects to the socket PluginToHost checked, not to a symlink the
// plugin put in its place afterwards.
func TestDialRefusesASwappedSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "plugin1")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	good := accepts(t, l)
	other := filepath.Join(t.TempDir(), "other.sock")
	lo, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	bad := accepts(t, lo)

	r := &processRunner{plugin: "swapper", socketDir: dir}
	if _, _, err := r.PluginToHost("unix", sock); err != nil {
		t.Fatal(err)
	}
	c, err := r.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The listener closes what it accepts: EOF says it was accepted.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the checked socket did not accept the connection: %v", err)
	}
	c.Close()
	// The plugin swaps its socket for a link to another one.
	l.Close() // Go removes the socket file it made
	os.Remove(sock)
	os.Symlink(other, sock)
	if c, err := r.dial(context.Background()); err == nil {
		c.Close()
		t.Error("dialled a symlink put in place of the checked socket")
	}
	if n := bad(); n != 0 {
		t.Errorf("%d connections reached the other socket", n)
	}
	if n := good(); n != 1 {
		t.Errorf("the checked socket got %d connections, want 1", n)
	}
}

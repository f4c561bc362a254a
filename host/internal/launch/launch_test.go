package launch

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/sdk/transport"
)

// The plugin's environment is built here and only here: nothing of the
// host's own, the manifest's variables, then the host's, then go-plugin's.
func TestEnvironment(t *testing.T) {
	host := map[string]string{"HOST_SECRET": "x", "HTTPS_PROXY": "http://proxy:3128", transport.LifelineEnv: "9"}
	lookup := func(name string) (string, bool) { v, ok := host[name]; return v, ok }
	o := Options{
		PassEnv:  []string{"HTTPS_PROXY", "NOT_SET", transport.LifelineEnv}, // a manifest cannot move the lifeline
		LogLevel: hclog.Debug,
		Sandbox:  &sandbox.Spec{MemoryBytes: 64 << 20},
	}
	env := environment(o, lookup, []string{"PLEXPORTER_PLUGIN_MAGIC_COOKIE=c", "PLUGIN_UNIX_SOCKET_DIR=/tmp/d"})
	want := []string{
		"PATH=" + searchPath,
		"HTTPS_PROXY=http://proxy:3128",
		transport.LifelineEnv + "=9",
		transport.LogLevelEnv + "=debug",
		transport.LifelineEnv + "=3", // later wins, as exec.Cmd and the launcher's exec keep it
		"GOMEMLIMIT=67108864",
		"PLEXPORTER_PLUGIN_MAGIC_COOKIE=c",
		"PLUGIN_UNIX_SOCKET_DIR=/tmp/d",
	}
	if !slices.Equal(env, want) {
		t.Errorf("environment\n%s\nwant\n%s", strings.Join(env, "\n"), strings.Join(want, "\n"))
	}
	if unconfined := environment(Options{LogLevel: hclog.Info}, lookup, nil); slices.ContainsFunc(unconfined, func(e string) bool { return strings.HasPrefix(e, "GOMEMLIMIT=") }) {
		t.Error("GOMEMLIMIT without a sandbox memory limit")
	}
}

func TestCommand(t *testing.T) {
	p := discover.Plugin{Name: "rdma", Path: "/etc/plexporter/plugins.d/plexporter-rdma", Target: "/usr/lib/plexporter/plugins/plexporter-rdma"}
	bin, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	cmd, err := command(p, Options{}, bin, []string{"A=1"}, "/tmp/sock")
	if err != nil || cmd.Path != "/proc/self/fd/4" || cmd.Args[0] != p.Path || len(cmd.Args) != 1 || !slices.Equal(cmd.Env, []string{"A=1"}) || !slices.Equal(cmd.ExtraFiles, []*os.File{bin}) {
		t.Fatalf("unconfined command %v %q %v %v: %v", cmd.Path, cmd.Args, cmd.Env, cmd.ExtraFiles, err)
	}
	if os.Geteuid() != 0 {
		return // handing the socket directory to another user needs root
	}
	sock := t.TempDir()
	spec := &sandbox.Spec{Binary: p.Target, Argv0: p.Path, UID: 65534, GID: 65534}
	cmd, err = command(p, Options{Sandbox: spec}, bin, []string{"A=1"}, sock)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	if cmd.Path != self || cmd.Args[1] != sandbox.LaunchArg || !strings.Contains(cmd.Args[2], `"socket_dir":"`+sock+`"`) || !strings.Contains(cmd.Args[2], `"binary_fd":4`) || !slices.Equal(cmd.Env, []string{"A=1"}) || !slices.Equal(cmd.ExtraFiles, []*os.File{bin}) {
		t.Errorf("launcher command %v %q %v", cmd.Path, cmd.Args, cmd.Env)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("the socket directory must belong to the plugin's user: %v", err)
	}
	if spec.SocketDir != "" {
		t.Error("command must not change the settings' spec")
	}
}

// A binary that is not the one pinned is refused before anything runs.
func TestPinMismatch(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "plexporter-x")
	os.WriteFile(bin, []byte("#!/bin/sh\ntouch \"$0.ran\"\n"), 0o755)
	sum, err := FileSHA256(bin)
	if err != nil || len(sum) != 64 {
		t.Fatal(sum, err)
	}
	_, err = Start(discover.Plugin{Name: "x", Path: bin, Target: bin}, Options{SHA256: strings.Repeat("0", 64)}, slog.New(slog.DiscardHandler))
	var pin *PinError
	if !errors.As(err, &pin) || pin.SHA256 != sum || !strings.Contains(err.Error(), "the manifest pins") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(bin + ".ran"); err == nil {
		t.Fatal("the refused binary ran")
	}
}

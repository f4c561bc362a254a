package launch

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

var handshakeBin string

// startTimeout is generous: the refusals tested come from the handshake's
// content, never from a start that a loaded machine made slow.
const startTimeout = time.Minute

func TestMain(m *testing.M) {
	// This test binary is also the sandbox launcher of the tests that
	// start a sandboxed command (command re-executes os.Executable()), as
	// the host binary is.
	if len(os.Args) > 1 && os.Args[1] == sandbox.LaunchArg {
		sandbox.Launch()
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildArg {
		sandbox.LaunchChild()
	}
	dir, err := os.MkdirTemp("", "launch-test")
	if err != nil {
		panic(err)
	}
	handshakeBin = filepath.Join(dir, "plexporter-hostile")
	cmd := exec.Command("go", "build", "-o", handshakeBin, "../../../internal/testkit/testplugins/handshake")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		panic("build the handshake test plugin: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// accepts counts the connections a listener accepts until it is closed.
func accepts(t *testing.T, l net.Listener) func() int {
	n := make(chan int, 1)
	go func() {
		count := 0
		for {
			c, err := l.Accept()
			if err != nil {
				n <- count
				return
			}
			count++
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return func() int {
		l.Close()
		return <-n
	}
}

// A plugin's handshake line may name only a unix socket directly in the
// directory the host made for it: the host refuses every other address
// with an error naming the plugin and the address, and never connects.
func TestHostileHandshakeAddressIsNotDialled(t *testing.T) {
	parent := t.TempDir() // the instance directory: socket directories go in it
	outside := filepath.Join(t.TempDir(), "victim.sock")
	beside := filepath.Join(parent, "beside.sock") // next to the socket directory, not in it
	for name, tc := range map[string]struct {
		env    map[string]string
		listen func(t *testing.T) net.Listener
		addr   string // in the error; "" for the listener's own
		why    string
	}{
		"tcp": {
			env:    map[string]string{"HANDSHAKE_NETWORK": "tcp"},
			listen: func(t *testing.T) net.Listener { l, _ := net.Listen("tcp", "127.0.0.1:0"); return l },
			why:    "not a unix socket",
		},
		"a unix socket elsewhere": {
			env:    map[string]string{"HANDSHAKE_NETWORK": "unix", "HANDSHAKE_ADDRESS": outside},
			listen: func(t *testing.T) net.Listener { l, _ := net.Listen("unix", outside); return l },
			addr:   outside,
			why:    "not directly in the plugin's socket directory",
		},
		"a path that climbs out of the socket directory": {
			env:    map[string]string{"HANDSHAKE_NETWORK": "unix", "HANDSHAKE_ADDRESS": "${PLUGIN_UNIX_SOCKET_DIR}/../beside.sock"},
			listen: func(t *testing.T) net.Listener { l, _ := net.Listen("unix", beside); return l },
			addr:   "/../beside.sock",
			why:    "not directly in the plugin's socket directory",
		},
		"a symlink in the socket directory to another socket": {
			env:    map[string]string{"HANDSHAKE_LINK_TO": outside},
			listen: func(t *testing.T) net.Listener { l, _ := net.Listen("unix", outside); return l },
			addr:   "/plugin-link",
			why:    "a symlink, not a socket",
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := tc.listen(t)
			if l == nil {
				t.Fatal("listen")
			}
			for _, k := range []string{"HANDSHAKE_NETWORK", "HANDSHAKE_ADDRESS", "HANDSHAKE_LINK_TO"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if tc.env["HANDSHAKE_NETWORK"] == "tcp" {
				t.Setenv("HANDSHAKE_ADDRESS", l.Addr().String())
				tc.addr = l.Addr().String()
			}
			connections := accepts(t, l)
			p := discover.Plugin{Name: "hostile", Path: handshakeBin, Target: handshakeBin}
			proc, err := Start(p, Options{PassEnv: []string{"HANDSHAKE_NETWORK", "HANDSHAKE_ADDRESS", "HANDSHAKE_LINK_TO"}, StartTimeout: startTimeout, SocketParent: parent}, slog.New(slog.DiscardHandler))
			if err == nil {
				// gRPC connects lazily: a first call makes it dial.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				proc.Client().Info(ctx, &pluginv1.InfoRequest{})
				cancel()
				proc.Stop()
			}
			time.Sleep(100 * time.Millisecond) // a dial in flight would land now
			if n := connections(); n != 0 {
				t.Errorf("the host connected %d times to the address the plugin named", n)
			}
			if err == nil {
				t.Fatal("the host accepted the plugin's address")
			}
			msg := err.Error()
			if !strings.Contains(msg, "plugin hostile") || !strings.Contains(msg, tc.addr) || !strings.Contains(msg, tc.why) || !strings.Contains(msg, "refusing") {
				t.Errorf("the error must name the plugin, the address (%s) and why (%s): %v", tc.addr, tc.why, err)
			}
			var refused *AddressError
			if !errors.As(err, &refused) || refused.Plugin != "hostile" {
				t.Errorf("want an *AddressError (supervise refuses the plugin instead of restarting it), got %T", err)
			}
		})
	}
}

// A plugin of another protocol generation (go-plugin core protocol, the
// application protocol's major, net/rpc) fails its start with a
// *ProtocolError that names the plugin and both sides' versions, so that
// the supervisor refuses it instead of restarting it forever.
func TestOtherProtocolIsAProtocolError(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		says string // go-plugin's words in the error
	}{
		"core protocol 2":        {map[string]string{"HANDSHAKE_CORE": "2"}, "core API version"},
		"application protocol 2": {map[string]string{"HANDSHAKE_APP": "2"}, "Plugin version: 2"},
		"net/rpc":                {map[string]string{"HANDSHAKE_PROTOCOL": "netrpc"}, "unsupported plugin protocol"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"HANDSHAKE_CORE", "HANDSHAKE_APP", "HANDSHAKE_PROTOCOL", "HANDSHAKE_LINK_TO"} {
				t.Setenv(k, tc.env[k])
			}
			t.Setenv("HANDSHAKE_NETWORK", "unix")
			t.Setenv("HANDSHAKE_ADDRESS", "${PLUGIN_UNIX_SOCKET_DIR}/plugin.sock")
			t.Setenv("HANDSHAKE_LISTEN", "1")
			p := discover.Plugin{Name: "elder", Path: handshakeBin, Target: handshakeBin}
			pass := []string{"HANDSHAKE_NETWORK", "HANDSHAKE_ADDRESS", "HANDSHAKE_LISTEN", "HANDSHAKE_CORE", "HANDSHAKE_APP", "HANDSHAKE_PROTOCOL"}
			proc, err := Start(p, Options{PassEnv: pass, StartTimeout: startTimeout, SocketParent: t.TempDir()}, slog.New(slog.DiscardHandler))
			if err == nil {
				proc.Stop()
				t.Fatal("the host started a plugin of another protocol")
			}
			var other *ProtocolError
			if !errors.As(err, &other) || other.Plugin != "elder" {
				t.Fatalf("want a *ProtocolError for plugin elder, got %T: %v", err, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.says) || !strings.Contains(msg, "plexporter.plugin.v1") || !strings.Contains(msg, "install a build") {
				t.Errorf("the error must say what differs (%q), the host's protocol and what to do: %v", tc.says, err)
			}
		})
	}
}

package sandbox

import (
	"reflect"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// The spec reaches the launcher on its command line, whole.
func TestLauncherArgsRoundTrip(t *testing.T) {
	in := &Spec{Binary: "/usr/lib/plexporter/plugins/plexporter-nvme", Argv0: "plexporter-nvme", UID: 998, GID: 997,
		Caps: []string{"cap_sys_admin"}, Devices: []string{"/dev/nvme*"}, SocketDir: "/tmp/plugin-dir1", MemoryBytes: 64 << 20, Landlock: true,
		Network:      manifest.Network{Netlink: []string{"rdma"}, Unix: []string{"/run/x.sock"}, Inet: &manifest.Inet{TCPConnect: []uint16{443}, UDP: true}},
		PIDNamespace: true}
	args, err := in.LauncherArgs()
	if err != nil || len(args) != 2 || args[0] != LaunchArg {
		t.Fatalf("args %q, %v", args, err)
	}
	out, err := decodeSpec(args, LaunchArg)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
	}
	if _, err := decodeSpec([]string{LaunchArg}, LaunchArg); err == nil || !strings.Contains(err.Error(), "started by plexporter only") {
		t.Errorf("missing spec: %v", err)
	}
	if _, err := decodeSpec([]string{LaunchArg, "{"}, LaunchArg); err == nil {
		t.Error("a broken spec must be refused")
	}
	if _, err := decodeSpec(args, ChildArg); err == nil {
		t.Error("the child launcher must not take the init's arguments")
	}
}

// Command handshake is a test-only plugin (never shipped) that is hostile
// before it has said anything else: its go-plugin handshake line names an
// address the host must not dial. HANDSHAKE_NETWORK and HANDSHAKE_ADDRESS
// (with $PLUGIN_UNIX_SOCKET_DIR expanded) are the address; with
// HANDSHAKE_LINK_TO it instead puts a symlink to that socket into its own
// socket directory and names the link. HANDSHAKE_CORE, HANDSHAKE_APP and
// HANDSHAKE_PROTOCOL replace the line's core protocol version, application
// protocol version and "grpc" (a plugin of another protocol generation).
// With HANDSHAKE_LISTEN set it listens on its address first. Then it waits
// to be killed.
package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/plexporter/plexporter/sdk/transport"
)

func main() {
	network, addr := os.Getenv("HANDSHAKE_NETWORK"), os.ExpandEnv(os.Getenv("HANDSHAKE_ADDRESS"))
	if target := os.Getenv("HANDSHAKE_LINK_TO"); target != "" {
		network, addr = "unix", filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin-link")
		if err := os.Symlink(target, addr); err != nil {
			fmt.Fprintln(os.Stderr, "handshake:", err)
			os.Exit(1)
		}
	}
	if os.Getenv("HANDSHAKE_LISTEN") != "" {
		if _, err := net.Listen(network, addr); err != nil {
			fmt.Fprintln(os.Stderr, "handshake:", err)
			os.Exit(1)
		}
	}
	core := or(os.Getenv("HANDSHAKE_CORE"), fmt.Sprint(plugin.CoreProtocolVersion))
	app := or(os.Getenv("HANDSHAKE_APP"), fmt.Sprint(transport.ProtocolVersion))
	proto := or(os.Getenv("HANDSHAKE_PROTOCOL"), string(plugin.ProtocolGRPC))
	fmt.Printf("%s|%s|%s|%s|%s|\n", core, app, network, addr, proto)
	time.Sleep(time.Hour)
}

func or(s, otherwise string) string {
	if s != "" {
		return s
	}
	return otherwise
}

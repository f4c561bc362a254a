// Command handshake is a test-only plugin (never shipped) that is hostile
// before it has said anything else: its go-plugin handshake line names an
// address the host must not dial. HANDSHAKE_NETWORK and HANDSHAKE_ADDRESS
// (with $PLUGIN_UNIX_SOCKET_DIR expanded) are the address; with
// HANDSHAKE_LINK_TO it instead puts a symlink to that socket into its own
// socket directory and names the link. Then it waits to be killed.
package main

import (
	"fmt"
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
	fmt.Printf("%d|%d|%s|%s|%s|\n", plugin.CoreProtocolVersion, transport.ProtocolVersion, network, addr, plugin.ProtocolGRPC)
	time.Sleep(time.Hour)
}

// Package transport is the meeting point of host and plugin: the go-plugin
// handshake and the glue that puts the PluginService on go-plugin's gRPC
// connection. Both sides import it so they can never disagree on it.
package transport

import (
	"context"
	"syscall"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// ProtocolVersion is the go-plugin handshake protocol version. It changes only
// with an incompatible protocol package (plexporter.plugin.v2).
const ProtocolVersion = 1

// APIVersion is the semantic version of proto/plexporter/plugin/v1 this
// build implements. Minor versions add fields or RPCs compatibly; 1.1
// added native histograms (FamilyChunk fields 12 to 19), 1.2 the host's
// own version in ConfigureRequest (field 6), 1.3 MetricDescriptor.selected_by
// (field 6) and the host's device filter in ConfigureRequest (fields 7, 8).
const APIVersion = "1.3.0"

// PluginName is the key of the collector service in go-plugin's plugin set.
const PluginName = "collector"

// Handshake is shared by host and plugins. The magic cookie only keeps people
// from running a plugin binary by hand by mistake; it is not a security feature.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "PLEXPORTER_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "d3d1a2f0-prometheus-plugin-host",
}

// Names the host and the SDK both use to find things in the plugin's
// environment. The host sets them (host/internal/launch builds the plugin's
// whole environment); the SDK reads them in Serve.
const (
	// LifelineEnv holds the file descriptor of the lifeline pipe: the host
	// keeps the write end open for its whole life, so the plugin reads EOF
	// exactly when the host is gone, however it died.
	LifelineEnv = "PLEXPORTER_LIFELINE_FD"
	// LogLevelEnv holds the host's log level (trace, debug, info, warn,
	// error), so a plugin does not format lines the host would drop.
	LogLevelEnv = "PLEXPORTER_PLUGIN_LOG_LEVEL"
)

// ParentDeathSignal is what the kernel sends a plugin when the host dies
// (Linux's parent-death signal, set by the host when it forks the plugin and
// again by the sandbox launcher after its credential change clears it).
// SIGTERM rather than SIGKILL: an SDK plugin answers it by killing its whole
// process group, which a SIGKILL would not give it the chance to do.
const ParentDeathSignal = syscall.SIGTERM

// GRPCPlugin adapts a PluginServiceServer (plugin side) or produces a
// PluginServiceClient (host side) for go-plugin.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl pluginv1.PluginServiceServer
}

// GRPCServer registers the service on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginv1.RegisterPluginServiceServer(s, p.Impl)
	return nil
}

// GRPCClient returns a pluginv1.PluginServiceClient.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginv1.NewPluginServiceClient(c), nil
}

// PluginSet is the versioned plugin map for go-plugin's ClientConfig and
// ServeConfig. server is nil on the host side.
func PluginSet(server pluginv1.PluginServiceServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &GRPCPlugin{Impl: server}},
	}
}

// Package plumbing reaches the parts of package sdk that only sdktest and
// the SDK's own tests use, so that they stay out of the API a plugin's
// author reads (`go doc ./sdk`).
package plumbing

import (
	"log/slog"

	"google.golang.org/protobuf/types/known/structpb"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// NewServer wraps p, an sdk.Plugin, as the gRPC service Serve registers,
// logging the plugin's panics to log (nil: nowhere). Package sdk sets it
// when it is initialised, so callers import sdk too; p is typed any
// because this package cannot import sdk (sdk imports it).
var NewServer func(p any, log *slog.Logger) pluginv1.PluginServiceServer

// WithConfigSection returns cfg, an sdk.Config, with raw as the plugin's
// config section (what Config.Decode reads), for sdktest.Config. Package
// sdk sets it when it is initialised.
var WithConfigSection func(cfg any, raw *structpb.Struct) any

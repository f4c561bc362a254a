// Package testhook is sdktest's way into package sdk: the server Serve
// registers, a Writer that sends to a function of the caller's, a Config
// with a given section. Keeping them here keeps them out of the API a
// plugin's author reads (`go doc ./sdk`); a vendor's tests get them from
// sdktest, whose typed functions are the only callers (besides sdk's own
// tests).
//
// Package sdk sets the hooks when it is initialised. Values that are sdk
// types are typed any here because sdk imports this package; sdktest's
// tests exercise every hook, so a mistyped one fails there. Nothing else
// uses them: the host and this module's tools write batches with
// internal/wire's Encoder directly.
package testhook

import (
	"log/slog"

	"google.golang.org/protobuf/types/known/structpb"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// NewServer wraps p, an sdk.Plugin, as the gRPC service Serve registers,
// logging the plugin's panics to log (nil: nowhere).
var NewServer func(p any, log *slog.Logger) pluginv1.PluginServiceServer

// WithConfigSection returns cfg, an sdk.Config, with raw as the plugin's
// config section (what Config.Decode reads).
var WithConfigSection func(cfg any, raw *structpb.Struct) any

// NewWriter returns an *sdk.Writer that hands each full batch, and the
// errors recorded so far, to send; its Flush sends the rest.
var NewWriter func(filter *metricfilter.Filter, prefix string, send func(*pluginv1.CollectResponse) error) any

// Package sdkhook reaches the parts of package sdk that only this module's
// hosts and tests use: the server Serve registers, a Writer that sends to a
// function of the caller's, a Config with a given section. Keeping them
// here keeps them out of the API a plugin's author reads (`go doc ./sdk`);
// a vendor's tests get what they need of them from sdktest.
//
// Package sdk sets the hooks when it is initialised, so a caller imports
// sdk too (it always does: it names sdk's types). Values that are sdk types
// are typed any here, because sdk imports this package.
package sdkhook

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

// WriterFunc is the constructor NewWriter calls; W is *sdk.Writer.
type WriterFunc[W any] func(filter *metricfilter.Filter, prefix string, send func(*pluginv1.CollectResponse) error) W

var newWriter any // a WriterFunc[*sdk.Writer]

// SetNewWriter is called by package sdk.
func SetNewWriter[W any](f WriterFunc[W]) { newWriter = f }

// RestartWriter readies w, an *sdk.Writer that was flushed, for another
// round that sends to send, keeping its memory: a caller
// that makes Writers often keeps them in a pool.
var RestartWriter func(w any, send func(*pluginv1.CollectResponse) error)

// NewWriter returns an *sdk.Writer (W) that hands each full batch, and the
// errors recorded so far, to send; call its Flush at the end:
//
//	w := sdkhook.NewWriter[*sdk.Writer](filter, "", rec.Send)
func NewWriter[W any](filter *metricfilter.Filter, prefix string, send func(*pluginv1.CollectResponse) error) W {
	return newWriter.(WriterFunc[W])(filter, prefix, send)
}

package sdk

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// testLogsEnv, set to 1, shows the SDK's log lines in a test binary, where
// they are silent by default: a plugin's warnings about its fixtures would
// bury the test's own output.
const testLogsEnv = "PLEXPORTER_TEST_PLUGIN_LOGS"

// sink writes the plugin's log lines as hclog JSON on stderr: go-plugin on
// the host side parses each line and re-logs it under the plugin's name at
// its level (host/internal/pluginlog). go-plugin's own lines in the plugin
// go to it directly; Logger's go through hclogHandler.
var sink = hclog.New(&hclog.LoggerOptions{
	JSONFormat: true,
	Output:     logOutput(),
	Level:      hclog.Info,
})

func logOutput() io.Writer {
	if testing.Testing() && os.Getenv(testLogsEnv) != "1" {
		return io.Discard
	}
	return os.Stderr
}

var logger = slog.New(&hclogHandler{sink: sink})

// Logger is the plugin's logger. Its lines reach the host's log at their
// level, tagged with the plugin's name; the host's --log.level applies
// (lines below it are not even formatted). In a test binary it is silent
// unless PLEXPORTER_TEST_PLUGIN_LOGS=1.
func Logger() *slog.Logger { return logger }

// hclogHandler is a slog.Handler that writes through an hclog.Logger, so a
// plugin logs with log/slog while the wire format to the host stays
// go-plugin's. Groups become dotted key prefixes.
type hclogHandler struct {
	sink  hclog.Logger
	group string // prefix of the keys: "g1.g2." or ""
	attrs []any  // key/value pairs from WithAttrs, keys prefixed
}

func (h *hclogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return hclogLevel(l) >= h.sink.GetLevel()
}

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := make([]any, 0, len(h.attrs)+2*r.NumAttrs())
	args = append(args, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = appendAttr(args, h.group, a)
		return true
	})
	h.sink.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (h *hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clip(h.attrs)
	for _, a := range attrs {
		c.attrs = appendAttr(c.attrs, h.group, a)
	}
	return &c
}

func (h *hclogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

// appendAttr appends a's key/value pairs, flattening groups, with values
// as hclog would get them from a plugin calling it directly.
func appendAttr(args []any, prefix string, a slog.Attr) []any {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return args // slog's rule: an empty attribute is ignored
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			args = appendAttr(args, prefix, g)
		}
		return args
	}
	return append(args, prefix+a.Key, a.Value.Any())
}

// hclogLevel maps slog levels onto hclog's; slog's levels between the named
// ones round down, and below Debug is hclog's Trace.
func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}

// Package pluginlog gives go-plugin the hclog.Logger it wants while every
// line ends up in the host's slog logger: go-plugin's own lines about a
// plugin, and the plugin's log lines (hclog JSON on its stderr, which
// go-plugin parses and re-logs), appear in the host's log format.
//
// Every line says who speaks exactly once: the adapter adds plugin=<name>,
// and a key the host owns that arrives with the line is renamed rather than
// repeated. go-plugin names the process it runs under "plugin" (its path:
// renamed "path"); a plugin that logs plugin=other, or its own time, level,
// msg or source, gets them as reported_plugin=other and so on, so it cannot
// pose as another plugin. With --log.format=json a repeated key would
// otherwise be a JSON object with two "plugin" members, and most readers keep
// only the last.
package pluginlog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// Key is the one key naming the plugin a line is about.
const Key = "plugin"

// New returns an hclog.Logger writing to l (which must not carry a plugin
// key itself) for the plugin called name. path is what go-plugin calls the
// process it runs: its runner's Name, the plugin's path.
func New(l *slog.Logger, name, path string, level hclog.Level) hclog.Logger {
	return &adapter{l: l, plugin: name, path: path, level: level}
}

type adapter struct {
	l       *slog.Logger
	plugin  string
	path    string
	name    string
	level   hclog.Level
	implied []any
}

var levels = map[hclog.Level]slog.Level{
	hclog.Trace: slog.LevelDebug - 4,
	hclog.Debug: slog.LevelDebug,
	hclog.Info:  slog.LevelInfo,
	hclog.Warn:  slog.LevelWarn,
	hclog.Error: slog.LevelError,
}

func (a *adapter) Log(level hclog.Level, msg string, args ...any) {
	if level < a.level || level == hclog.Off {
		return
	}
	sl, ok := levels[level]
	if !ok {
		sl = slog.LevelInfo
	}
	attrs := make([]any, 0, 2+len(a.implied)+len(args))
	attrs = append(attrs, Key, a.plugin)
	attrs = a.appendArgs(attrs, a.implied)
	attrs = a.appendArgs(attrs, args)
	a.l.Log(context.Background(), sl, msg, attrs...)
}

// appendArgs appends key/value pairs, renaming the keys the host owns. A
// value without a key is logged as extra.
func (a *adapter) appendArgs(dst, args []any) []any {
	for i := 0; i+1 < len(args); i += 2 {
		k, v := args[i], args[i+1]
		switch key, _ := k.(string); key {
		case Key:
			if s, ok := v.(string); ok && s == a.path {
				k = "path" // go-plugin naming the process
			} else {
				k = "reported_" + key
			}
		case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey:
			k = "reported_" + key
		}
		dst = append(dst, k, v)
	}
	if len(args)%2 == 1 {
		dst = append(dst, "extra", fmt.Sprint(args[len(args)-1]))
	}
	return dst
}

func (a *adapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *adapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *adapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *adapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *adapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *adapter) IsTrace() bool                 { return a.level <= hclog.Trace }
func (a *adapter) IsDebug() bool                 { return a.level <= hclog.Debug }
func (a *adapter) IsInfo() bool                  { return a.level <= hclog.Info }
func (a *adapter) IsWarn() bool                  { return a.level <= hclog.Warn }
func (a *adapter) IsError() bool                 { return a.level <= hclog.Error }
func (a *adapter) ImpliedArgs() []any            { return a.implied }
func (a *adapter) Name() string                  { return a.name }
func (a *adapter) SetLevel(l hclog.Level)        { a.level = l }
func (a *adapter) GetLevel() hclog.Level         { return a.level }

func (a *adapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(a.implied[:len(a.implied):len(a.implied)], args...)
	return &c
}

// Named is called by go-plugin with the plugin's binary name; lines are
// tagged with the plugin already, so the name is kept but not logged.
func (a *adapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (a *adapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *adapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *adapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		a.Info(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

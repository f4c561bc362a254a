// Package pluginlog gives go-plugin the hclog.Logger it wants while every
// line ends up in the host's slog logger: plugin log lines (hclog JSON on the
// plugin's stderr) appear in the host's log format, tagged with the plugin.
package pluginlog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// New returns an hclog.Logger writing to l.
func New(l *slog.Logger, level hclog.Level) hclog.Logger {
	return &adapter{l: l, level: level}
}

type adapter struct {
	l       *slog.Logger
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
	if len(args)%2 == 1 {
		args = append(args[:len(args)-1:len(args)-1], "extra", fmt.Sprint(args[len(args)-1]))
	}
	a.l.Log(context.Background(), sl, msg, append(a.implied[:len(a.implied):len(a.implied)], args...)...)
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

// Named is called by go-plugin with the plugin's binary name; the host
// already tags lines with the plugin, so the name is kept but not repeated.
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

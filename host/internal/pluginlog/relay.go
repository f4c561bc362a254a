package pluginlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Relay logs a plugin's stderr lines into the host's log: hclog JSON lines
// at their level with their attributes, other lines as go-plugin logs
// them (a "[WARN]" prefix is a level, a Go panic and what follows it are
// errors, the rest is debug). It replaces go-plugin's own parser, which
// decoded every line before looking at its level and let a plugin set any
// attribute of its lines.
//
// A plugin sets only its own attributes: its keys that the host and
// go-plugin put on lines about a plugin (OwnedKeys) are renamed
// reported_<key>, its @timestamp is dropped (the host stamps the line),
// and at most MaxAttrs attributes are kept. Relay is not safe for
// concurrent use: one reader calls Line.
type Relay struct {
	l       *slog.Logger
	plugin  string
	level   hclog.Level
	inPanic bool
}

// MaxAttrs is the number of attributes of one plugin line the host keeps.
const MaxAttrs = 32

// OwnedKeys are the attribute keys the host and go-plugin write on lines
// about a plugin; a plugin's line carries them as reported_<key>.
var OwnedKeys = []string{Key, "path", "pid", "timestamp", slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey}

// NewRelay returns the relay of plugin name's lines into l (which must not
// carry a plugin key itself); lines below level are skipped.
func NewRelay(l *slog.Logger, name string, level hclog.Level) *Relay {
	return &Relay{l: l, plugin: name, level: level}
}

// Line logs one line (without its newline).
func (r *Relay) Line(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 || r.level == hclog.Off {
		return
	}
	if line[0] == '{' {
		if lvl, ok := jsonLevel(line); ok && lvl != hclog.NoLevel && lvl < r.level {
			return // below the host's level: not even decoded
		}
		var raw map[string]any
		if json.Unmarshal(line, &raw) == nil {
			r.entry(raw, line)
			return
		}
	}
	r.plain(string(line))
}

// jsonLevel finds hclog's "@level" without decoding the line (hclog writes
// it as "@level":"info"); ok is false when the line does not have it so.
func jsonLevel(line []byte) (hclog.Level, bool) {
	const key = `"@level":"`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return hclog.NoLevel, false
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || j > 8 {
		return hclog.NoLevel, false
	}
	return hclog.LevelFromString(string(rest[:j])), true
}

func (r *Relay) entry(raw map[string]any, line []byte) {
	level := hclog.NoLevel
	if v, ok := raw["@level"].(string); ok {
		level = hclog.LevelFromString(v)
	}
	if level == hclog.NoLevel {
		// Not hclog's: go-plugin logs such JSON verbatim at debug.
		r.log(hclog.Debug, string(line), nil)
		return
	}
	msg := ""
	if v, ok := raw["@message"]; ok {
		if s, isString := v.(string); isString {
			msg = s
		} else {
			msg = fmt.Sprint(v)
		}
	}
	delete(raw, "@level")
	delete(raw, "@message")
	delete(raw, "@timestamp")
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a map has no order; the log should
	attrs := make([]any, 0, 2*min(len(keys), MaxAttrs)+2)
	for i, k := range keys {
		if i == MaxAttrs {
			attrs = append(attrs, "reported_attrs_dropped", len(keys)-MaxAttrs)
			break
		}
		name := k
		if slices.Contains(OwnedKeys, k) || strings.HasPrefix(k, "@") {
			name = "reported_" + strings.TrimPrefix(k, "@")
		}
		attrs = append(attrs, name, raw[k])
	}
	r.log(level, msg, attrs)
}

// plain logs a line that is not hclog JSON the way go-plugin does.
func (r *Relay) plain(line string) {
	level := hclog.Debug
	switch {
	case strings.HasPrefix(line, "[TRACE]"):
		level = hclog.Trace
	case strings.HasPrefix(line, "[DEBUG]"):
		level = hclog.Debug
	case strings.HasPrefix(line, "[INFO]"):
		level = hclog.Info
	case strings.HasPrefix(line, "[WARN]"):
		level = hclog.Warn
	case strings.HasPrefix(line, "[ERROR]"):
		level = hclog.Error
	case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
		r.inPanic = true
		level = hclog.Error
	case r.inPanic:
		level = hclog.Error
	}
	r.log(level, line, nil)
}

func (r *Relay) log(level hclog.Level, msg string, attrs []any) {
	if level < r.level {
		return
	}
	sl, ok := levels[level]
	if !ok {
		sl = slog.LevelInfo
	}
	r.l.Log(context.Background(), sl, msg, append([]any{Key, r.plugin}, attrs...)...)
}

package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Logger's lines leave the plugin as hclog JSON, the format go-plugin on
// the host parses: level, message, and every attribute as a top-level key
// (groups dotted, errors as their text).
func TestLoggerWritesHclogJSON(t *testing.T) {
	var buf bytes.Buffer
	s := hclog.New(&hclog.LoggerOptions{JSONFormat: true, Output: &buf, Level: hclog.Info})
	l := slog.New(&hclogHandler{sink: s})

	l.Debug("not shown")
	l.With("device", "nvme0").WithGroup("smart").Warn("read failed", "error", errors.New("EIO"), slog.Group("log", "page", 2), "attempt", 3)
	l.Info("plain")

	var lines []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (Debug is below Info): %v", len(lines), lines)
	}
	want := map[string]any{
		"@level": "warn", "@message": "read failed", "device": "nvme0",
		"smart.error": "EIO", "smart.log.page": float64(2), "smart.attempt": float64(3),
	}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
		}
	}
	if lines[1]["@level"] != "info" || lines[1]["@message"] != "plain" {
		t.Errorf("second line %v", lines[1])
	}
}

func TestLogLevelsMapOntoHclog(t *testing.T) {
	for l, want := range map[slog.Level]hclog.Level{
		slog.LevelDebug - 4: hclog.Trace, slog.LevelDebug: hclog.Debug, slog.LevelInfo: hclog.Info,
		slog.LevelInfo + 2: hclog.Info, slog.LevelWarn: hclog.Warn, slog.LevelError: hclog.Error, slog.LevelError + 4: hclog.Error,
	} {
		if got := hclogLevel(l); got != want {
			t.Errorf("%v -> %v, want %v", l, got, want)
		}
	}
	s := hclog.New(&hclog.LoggerOptions{Output: &bytes.Buffer{}, Level: hclog.Warn})
	h := &hclogHandler{sink: s}
	if h.Enabled(t.Context(), slog.LevelInfo) || !h.Enabled(t.Context(), slog.LevelWarn) {
		t.Error("Enabled does not follow the sink's level")
	}
	// The host's level, set at run time (Serve reads it from the
	// environment), applies to lines logged after it.
	s.SetLevel(hclog.Debug)
	if !h.Enabled(t.Context(), slog.LevelDebug) {
		t.Error("Enabled ignores a level set later")
	}
}

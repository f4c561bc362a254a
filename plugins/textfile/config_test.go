package main

import (
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	dir := dirWith(t, nil)
	p := newPlugin()
	err := sdktest.Configure(t, p, map[string]any{
		"directories":         []any{dir + "/", "/var/lib/node_exporter/textfile_collector"},
		"max_file_bytes":      1 << 20,
		"max_series_per_file": 500,
		"max_series":          2000,
		"max_age":             "15m",
	}, sdk.Paths{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if len(c.Directories) != 2 || c.Directories[0] != dir || c.MaxFileBytes != 1<<20 || c.MaxSeriesPerFile != 500 || c.MaxSeries != 2000 || c.MaxAge.Duration != 15*time.Minute {
		t.Errorf("config %+v", c)
	}
	p = newPlugin()
	if err := sdktest.Configure(t, p, nil, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if len(p.cfg.Directories) != 1 || p.cfg.Directories[0] != defaultDirectory || p.cfg.MaxAge.Duration != 0 {
		t.Errorf("defaults %+v", p.cfg)
	}
}

// TestConfigureRejects: each bad setting is refused with a message that
// names its key.
func TestConfigureRejects(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"directories": []any{}}, Key: "directories", Detail: "empty"},
		{Raw: map[string]any{"directories": []any{"textfile"}}, Key: "directories[0]", Detail: "not an absolute path"},
		{Raw: map[string]any{"directories": []any{"/a", "/a/"}}, Key: "directories[1]", Detail: "listed twice"},
		{Raw: map[string]any{"max_file_bytes": 0}, Key: "max_file_bytes", Detail: "not between"},
		{Raw: map[string]any{"max_file_bytes": 1 << 30}, Key: "max_file_bytes", Detail: "not between"},
		{Raw: map[string]any{"max_series_per_file": 0}, Key: "max_series_per_file", Detail: "above 0"},
		{Raw: map[string]any{"max_series": -1}, Key: "max_series", Detail: "above 0"},
		{Raw: map[string]any{"max_series": 10, "max_series_per_file": 20}, Key: "max_series_per_file", Detail: "above max_series"},
		{Raw: map[string]any{"max_age": "10ms"}, Key: "max_age", Detail: "at least 1s"},
		{Raw: map[string]any{"max_age": "soon"}, Key: "max_age", Detail: "not a duration"},
		{Raw: map[string]any{"directory": "/a"}, Key: "directory", Detail: "unknown key"},
	})
}

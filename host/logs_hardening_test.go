package main

import (
	"strings"
	"testing"
	"time"
)

// A plugin's stderr is parsed by go-plugin, which type-asserts hclog's
// "@message", "@level" and "@timestamp" to strings: before the host
// sanitized the stream, one line {"@message":1} from any plugin — sandboxed,
// as nobody — panicked the log reader and ended the whole exporter.
func TestHostileLogLineDoesNotKillTheHost(t *testing.T) {
	h := startHost(t, []string{"hostile", "good"}, `
  hostile: {config: {stderr_line: '{"@message":1,"@level":["x"],"@timestamp":7}'}}
  good: {config: {series: 3}}
`)
	time.Sleep(500 * time.Millisecond) // the line is read asynchronously
	if h.cmd.ProcessState != nil {
		t.Fatalf("host exited: %v", h.cmd.ProcessState)
	}
	body, mfs := h.scrape("")
	for _, p := range []string{"hostile", "good"} {
		if v := value(mfs, "plexporter_plugin_up", "plugin", p); v != 1 {
			t.Errorf("plexporter_plugin_up{plugin=%q} = %v, want 1", p, v)
		}
	}
	if !strings.Contains(body, `chaos_value{plugin="good",i="2"}`) {
		t.Error("the good plugin's series are missing")
	}
	if !strings.Contains(h.logs.String(), "plugin=hostile") {
		t.Error("the hostile plugin's line did not reach the log")
	}
}

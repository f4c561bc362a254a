package pluginlog

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLevelsArgsAndNames(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	l := New(base, "rdma", "/usr/lib/plexporter/plugins/plexporter-rdma", hclog.Info)

	l.Debug("hidden below the level")
	l.With("device", "mlx5_0").Warn("counter unreadable", "file", "port_rcv_data")
	l.Named("plexporter-rdma").Error("odd args", "dangling")
	out := buf.String()

	if strings.Contains(out, "hidden") {
		t.Errorf("debug line logged at info level:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="counter unreadable" plugin=rdma device=mlx5_0 file=port_rcv_data`,
		`level=ERROR msg="odd args" plugin=rdma extra=dangling`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !l.IsInfo() || l.IsDebug() {
		t.Error("level predicates wrong")
	}
	l.SetLevel(hclog.Trace)
	l.Trace("now visible")
	if !strings.Contains(buf.String(), "now visible") {
		t.Error("SetLevel did not take effect")
	}
}

// jsonKeys returns every member of a JSON object line in order, duplicates
// included (encoding/json's maps keep only the last).
func jsonKeys(t *testing.T, line string) (keys []string, values map[string][]any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	values = map[string][]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		keys = append(keys, key)
		values[key] = append(values[key], v)
	}
	return keys, values
}

// What go-plugin logs about the process (its path under "plugin") and what a
// plugin logs under the host's keys must not add a second plugin key, nor
// let the plugin pass for another.
func TestOnePluginKeyThePluginCannotOverride(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const path = "/usr/lib/plexporter/plugins/plexporter-nfs"
	l := New(base, "nfs", path, hclog.Debug)

	l.Error("plugin process exited", "plugin", path, "id", "4242", "error", "exit status 3") // go-plugin's own line
	relay := l.Named("plexporter-nfs")                                                       // go-plugin re-logging the plugin's stderr
	relay.Info("collected", "plugin", "rdma", "level", "ERROR", "msg", "forged", "time", "yesterday")
	relay.With("plugin", "ethtool").Warn("implied args too")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got:\n%s", buf.String())
	}
	for _, line := range lines {
		keys, values := jsonKeys(t, line)
		for _, k := range []string{"plugin", "level", "msg", "time"} {
			if n := len(values[k]); n != 1 {
				t.Errorf("%d %q keys in %s (keys %v)", n, k, line, keys)
			}
		}
		if got := values["plugin"]; len(got) == 0 || got[0] != "nfs" {
			t.Errorf("plugin = %v, want nfs: %s", got, line)
		}
	}
	_, exited := jsonKeys(t, lines[0])
	if exited["path"][0] != path || exited["level"][0] != "ERROR" {
		t.Errorf("go-plugin's process path must stay visible as path: %s", lines[0])
	}
	_, posed := jsonKeys(t, lines[1])
	if posed["reported_plugin"][0] != "rdma" || posed["level"][0] != "INFO" || posed["msg"][0] != "collected" || posed["reported_level"][0] != "ERROR" {
		t.Errorf("a plugin's own plugin/level/msg must be renamed, not obeyed: %s", lines[1])
	}
	_, implied := jsonKeys(t, lines[2])
	if implied["reported_plugin"][0] != "ethtool" {
		t.Errorf("implied args not renamed: %s", lines[2])
	}
}

func TestStandardWriterKeepsThePlugin(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), "nvme", "/p", hclog.Info)
	io.WriteString(l.StandardWriter(nil), "yamux: keepalive failed")
	if !strings.Contains(buf.String(), `msg="yamux: keepalive failed" plugin=nvme`) {
		t.Errorf("standard writer lines must be tagged: %s", buf.String())
	}
}

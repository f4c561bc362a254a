package launch

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/plexporter/plexporter/host/internal/pluginlog"
)

// relayed runs in through relayLogs and returns the host's JSON log lines.
func relayed(t *testing.T, in string, budget LogBudget) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	out := relayLogs(io.NopCloser(strings.NewReader(in)), pluginlog.NewRelay(log, "p", hclog.Trace), budget, log, "p", nil)
	if rest, err := io.ReadAll(out); err != nil || len(rest) != 0 {
		t.Fatalf("go-plugin's side carried %q (%v), want nothing", rest, err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// Lines that panicked go-plugin's parser are logged; hclog lines keep
// their level and attributes; a plugin's own path, timestamp and plugin
// keys are namespaced; a line longer than the reader's buffer is cut and
// the rest of it skipped.
func TestRelayLogs(t *testing.T) {
	long := strings.Repeat("x", 3*logLineLimit) + `{"@message":1}`
	in := `{"@message":2,"@level":["x"],"@timestamp":7}` + "\n" +
		`{"@message":"hi","@level":"warn","@timestamp":"2001-01-01T00:00:00.000000Z","path":"/forged","timestamp":"x","plugin":"rdma","k":1}` + "\n" +
		"plain\n" + long + "\n" + `{"@message":"ok","@level":"info"}`
	lines := relayed(t, in, DefaultLogBudget)
	if len(lines) != 5 {
		t.Fatalf("%d lines: %v", len(lines), lines)
	}
	if lines[0]["msg"] != `{"@message":2,"@level":["x"],"@timestamp":7}` || lines[0]["level"] != "DEBUG" {
		t.Errorf("non-hclog JSON: %v", lines[0])
	}
	w := lines[1]
	if w["msg"] != "hi" || w["level"] != "WARN" || w["plugin"] != "p" || w["k"] != 1.0 ||
		w["reported_path"] != "/forged" || w["reported_timestamp"] != "x" || w["reported_plugin"] != "rdma" || w["path"] != nil || w["timestamp"] != nil {
		t.Errorf("hclog line: %v", w)
	}
	if lines[2]["msg"] != "plain" {
		t.Errorf("plain line: %v", lines[2])
	}
	if m, _ := lines[3]["msg"].(string); len(m) > logLineLimit+64 || !strings.HasSuffix(m, "(line truncated at 64 KiB)") {
		t.Errorf("long line: %.100s… (%d bytes)", m, len(m))
	}
	if lines[4]["msg"] != "ok" {
		t.Errorf("after the long line: %v", lines[4])
	}
}

// Past its bursts a plugin's lines are dropped before they are parsed,
// counted, and told in one notice.
func TestRelayLogsBudget(t *testing.T) {
	var dropped atomic.Uint64
	budget := LogBudget{Lines: 1e-9, LineBurst: 10, Bytes: 1e-9, ByteBurst: 1 << 20, ReadRate: 0, NoticeInterval: time.Hour, Dropped: &dropped}
	in := strings.Repeat(`{"@message":"flood","@level":"error"}`+"\n", 1000)
	lines := relayed(t, in, budget)
	flood, notices := 0, 0
	for _, l := range lines {
		switch {
		case l["msg"] == "flood":
			flood++
		case strings.HasPrefix(l["msg"].(string), "plugin writes more log than its budget"):
			notices++
			if l["dropped"] != 990.0 {
				t.Errorf("notice: %v", l)
			}
		}
	}
	if flood != 10 || notices != 1 || dropped.Load() != 990 {
		t.Errorf("relayed %d lines, %d notices, counted %d dropped; want 10, 1, 990", flood, notices, dropped.Load())
	}
	// The byte bucket alone: 1 KiB lines against a 4 KiB burst.
	dropped.Store(0)
	budget = LogBudget{Lines: 1e-9, LineBurst: 1e9, Bytes: 1e-9, ByteBurst: 4 << 10, NoticeInterval: time.Hour, Dropped: &dropped}
	lines = relayed(t, strings.Repeat(strings.Repeat("y", 1023)+"\n", 100), budget)
	if len(lines) != 5 || dropped.Load() != 96 { // 4 lines and the notice
		t.Errorf("byte budget: %d log lines, %d dropped; want 5 and 96", len(lines), dropped.Load())
	}
}

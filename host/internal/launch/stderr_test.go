package launch

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestSanitizeLogLine(t *testing.T) {
	for in, want := range map[string]string{
		`{"@message":1}`:                            `{"@message":"1"}`,
		`{"@level":["x"],"@message":"m"}`:           `{"@level":"[x]","@message":"m"}`,
		`{"@timestamp":{"a":1},"k":"v"}`:            `{"@timestamp":"map[a:1]","k":"v"}`,
		`{"@message":null}`:                         `{"@message":"\u003cnil\u003e"}`,
		`{"@message":"fine","@level":"info","n":1}`: `{"@message":"fine","@level":"info","n":1}`,
		`not json at all`:                           `not json at all`,
		`{"broken":`:                                `{"broken":`,
		`null`:                                      `null`,
	} {
		if got := string(sanitizeLogLine([]byte(in))); got != want {
			t.Errorf("sanitizeLogLine(%s) = %s, want %s", in, got, want)
		}
	}
}

// Every hclog key go-plugin asserts to be a string is a string after the
// filter, on every line, and nothing else changes: other lines and lines
// too long for go-plugin to parse pass byte for byte.
func TestSanitizeLogsStream(t *testing.T) {
	long := strings.Repeat("x", 3*logLineLimit) + `{"@message":1}`
	in := `{"@message":2,"@level":"warn"}` + "\n" + "plain\n" + long + "\n" + `{"@message":"ok"}`
	out, err := io.ReadAll(sanitizeLogs(io.NopCloser(strings.NewReader(in)), nil))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) != 5 || lines[4] != "" {
		t.Fatalf("got %d lines, want 4 and a final newline: %q", len(lines), out)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["@message"] != "2" || first["@level"] != "warn" {
		t.Errorf("first line = %s (%v)", lines[0], err)
	}
	if lines[1] != "plain" || lines[2] != long || lines[3] != `{"@message":"ok"}` {
		t.Errorf("lines changed that must pass unchanged:\n%.200q", out)
	}
	if !bytes.HasSuffix(out, []byte("\n")) {
		t.Error("missing final newline")
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// instances.json, written by rocm-ernic-launcher (one entry per server)
// and updated by ernicctl (the vm entry). See README.md ("Run directory").

const manifestFile = "instances.json"

// instance is one manifest entry, with the loose typing of a file that
// Python writes and reads: every field may be missing or of another type.
type instance struct {
	ID   string // the id as ernic-exporter prints it (str() of the JSON value)
	num  int64  // the id as an integer, for finding <id>.stats
	isID bool   // num is valid
	Role string // "unknown" when absent
	PID  int    // 0 when absent or not an integer
	MAC  string
	VM   *vmEntry // nil when vm is null, absent or not an object
}

// vmEntry is an instance's vm object.
type vmEntry struct {
	Attached   bool    // truthy "attached"
	Name       string  // vm_name
	PID        int     // vm_pid, 0 when absent
	LaunchedAt float64 // launched_at (epoch seconds), 0 when absent or falsy
	GPU        string  // gpu: "" or comma-separated PCI addresses
}

// parseManifest decodes instances.json. ernic-exporter treats a file that
// is not valid JSON as {"instances": []}; the plugin returns the error so
// it is reported, and the caller decides.
func parseManifest(data []byte) ([]instance, error) {
	var doc struct {
		Instances []map[string]json.RawMessage `json:"instances"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	out := make([]instance, 0, len(doc.Instances))
	for _, e := range doc.Instances {
		in := instance{Role: "unknown"}
		in.ID, in.num, in.isID = idOf(e["id"])
		if r, ok := jsonString(e["role"]); ok {
			in.Role = r
		}
		in.PID = jsonInt(e["pid"])
		in.MAC, _ = jsonString(e["mac"])
		in.VM = vmOf(e["vm"])
		out = append(out, in)
	}
	return out, nil
}

func vmOf(raw json.RawMessage) *vmEntry {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return nil
	}
	vm := &vmEntry{Attached: truthy(m["attached"]), PID: jsonInt(m["vm_pid"])}
	vm.Name, _ = jsonString(m["vm_name"])
	vm.GPU, _ = jsonString(m["gpu"])
	if f, ok := jsonFloat(m["launched_at"]); ok && f > 0 {
		vm.LaunchedAt = f
	}
	return vm
}

// idOf renders the id as Python's str() would for the usual types (an
// integer, a string) and tells whether it names a .stats file.
func idOf(raw json.RawMessage) (label string, n int64, ok bool) {
	if s, isStr := jsonString(raw); isStr {
		return s, 0, false // Python's 3 == "3" is false: no .stats file matches
	}
	t := strings.TrimSpace(string(raw))
	if v, err := strconv.ParseInt(t, 10, 64); err == nil {
		return t, v, true
	}
	if t == "" {
		return "None", 0, false
	}
	return t, 0, false
}

// parsePythonInt parses a file-name stem or id string the way Python's
// int() does (sign, white space, underscores between digits).
func parsePythonInt(s string) (int64, error) {
	v := parseValue(s)
	if v.n == nil || !v.n.IsInt64() {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return v.n.Int64(), nil
}

func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func jsonFloat(raw json.RawMessage) (float64, bool) {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	return f, true
}

// jsonInt returns an integral JSON number that fits a pid, else 0.
func jsonInt(raw json.RawMessage) int {
	f, ok := jsonFloat(raw)
	if !ok || f != math.Trunc(f) || f <= 0 || f > math.MaxInt32 {
		return 0
	}
	return int(f)
}

// truthy is Python's bool() of a JSON value.
func truthy(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return false // null
}

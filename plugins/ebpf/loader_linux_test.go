package main

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestVerifierRejection: a program the verifier refuses (as an older
// kernel's verifier may refuse ours) leaves its group not running, with the
// verifier's reason in the error and the log line, and the fallback mode
// is still tried.
func TestVerifierRejection(t *testing.T) {
	requireRoot(t)
	requireTracefs(t)
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
		// Returns without setting R0: "R0 !read_ok".
		"bad": {Name: "bad", Type: ebpf.TracePoint, License: "GPL", Instructions: asm.Instructions{asm.Return()}},
		"good": {Name: "good", Type: ebpf.TracePoint, License: "GPL", Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 0), asm.Return(),
		}},
	}}
	var logged []string
	logf := func(msg string, args ...any) {
		var b strings.Builder
		b.WriteString(msg)
		for _, a := range args {
			b.WriteString(" ")
			b.WriteString(strings.TrimSpace(strings.ReplaceAll(toString(a), "\n", " ")))
		}
		logged = append(logged, b.String())
	}
	variants := []variant{
		{attach: attachTPBTF, hooks: []hook{{program: "bad", event: "block_rq_issue", group: "block"}}},
		{attach: attachTracepoint, hooks: []hook{{program: "good", event: "block_rq_issue", group: "block"}}},
	}
	p, states, err := loadGroup("test", spec, variants, "/sys/kernel/tracing", nil, logf)
	if err != nil {
		t.Fatalf("the fallback should run: %v", err)
	}
	defer p.Close()
	if p.attach != attachTracepoint {
		t.Errorf("running as %s, want the fallback", p.attach)
	}
	if len(states) != 2 || states[0].loaded || !states[1].loaded {
		t.Errorf("states %+v, want the first not loaded and the fallback loaded", states)
	}
	if len(logged) != 2 || !strings.Contains(logged[0], "not running") || !strings.Contains(logged[0], "verifier") || !strings.Contains(logged[0], "R0") {
		t.Errorf("log lines %q: want the rejection with the verifier's reason, then the fallback", logged)
	}

	// Without a fallback, the group's error carries the verifier's reason.
	_, _, err = loadGroup("test", spec, variants[:1], "/sys/kernel/tracing", nil, func(string, ...any) {})
	if err == nil || !strings.Contains(err.Error(), "R0") {
		t.Errorf("error %v, want the verifier's reason", err)
	}
}

func toString(a any) string {
	if s, ok := a.(string); ok {
		return s
	}
	return ""
}

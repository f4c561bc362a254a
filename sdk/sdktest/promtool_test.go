package sdktest

import (
	"fmt"
	"strings"
	"testing"
)

// errorRecorder is a testing.TB that records Errorf instead of failing.
type errorRecorder struct {
	testing.TB
	errs []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// PromtoolClean fails on a finding about any metric but the allowed ones,
// and only on those.
func TestPromtoolClean(t *testing.T) {
	PromtoolBinary(t)
	const text = "# HELP a_counter_total x\n# TYPE a_counter_total counter\na_counter_total 1\n" +
		"# HELP b_milliseconds x\n# TYPE b_milliseconds gauge\nb_milliseconds 1\n" +
		"# HELP c_bytes x\n# TYPE c_bytes gauge\nc_bytes 1\n"
	r := &errorRecorder{TB: t}
	PromtoolClean(r, text, map[string]string{"b_milliseconds": "a seed's name"})
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "a_counter_total") {
		t.Errorf("findings reported: %q, want only a_counter_total's", r.errs)
	}
	r = &errorRecorder{TB: t}
	PromtoolClean(r, text, map[string]string{"a_counter_total": "x", "b_milliseconds": "y"})
	if len(r.errs) != 0 {
		t.Errorf("allowed findings reported: %q", r.errs)
	}
}

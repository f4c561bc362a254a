package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status is a rule's outcome.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	// Skip: the rule could not be judged — the plugin sent nothing for it
	// to look at, a rule it depends on failed, or this mode cannot run it.
	// The detail says which.
	Skip Status = "SKIP"
)

// Result is one rule's outcome.
type Result struct {
	Rule   string `json:"rule"`
	What   string `json:"what"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Report is one run of the runner on one binary.
type Report struct {
	Binary string `json:"binary"`
	Plugin string `json:"plugin"`
	// Mode says how the plugin ran: "sandboxed (manifest <path>)",
	// "sandboxed (no manifest: no grants)" or "unconfined".
	Mode    string   `json:"mode"`
	Results []Result `json:"results"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
}

func (r *Report) add(res Result) {
	r.Results = append(r.Results, res)
	switch res.Status {
	case Pass:
		r.Passed++
	case Fail:
		r.Failed++
	case Skip:
		r.Skipped++
	}
}

// Result returns the outcome of one rule (false if it was not recorded).
func (r *Report) Result(rule string) (Result, bool) {
	for _, res := range r.Results {
		if res.Rule == rule {
			return res, true
		}
	}
	return Result{}, false
}

// OK reports whether no rule failed: the exit status a vendor's CI acts on.
func (r *Report) OK() bool { return r.Failed == 0 }

// WriteText prints one line per rule, `STATUS rule-id what[: detail]`,
// then a summary line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "checking %s (%s)\n", r.Binary, r.Mode)
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%s %s %s", res.Status, res.Rule, res.What)
		if res.Detail != "" {
			fmt.Fprintf(&b, ": %s", oneLine(res.Detail))
		}
		b.WriteByte('\n')
	}
	verdict := "conforms"
	if !r.OK() {
		verdict = "does not conform"
	}
	fmt.Fprintf(&b, "%s: %s: %d passed, %d failed, %d skipped (%s)\n", r.Binary, verdict, r.Passed, r.Failed, r.Skipped, r.Mode)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// round shortens a duration for a detail: milliseconds, or microseconds
// below one (a fast plugin's answers would all read "0s").
func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

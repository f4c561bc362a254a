package python

// The plugin's allowlist pushdown must select exactly what the host's own
// filter selects: a family the plugin skips and the host would show is
// lost without a trace. Both are asked the same questions.

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// pythonFilter loads the plugin's source as a module and answers, for each
// case, whether its Filter allows the name ("error: …" for a bad pattern);
// with a prefix, whether its pushdown (BatchBuilder.enabled) collects the
// family the plugin names so.
const pythonFilter = `
import importlib.machinery, importlib.util, json, sys
sys.path.insert(0, ".")
loader = importlib.machinery.SourceFileLoader("plugin", "plexporter-pyexample")
spec = importlib.util.spec_from_loader("plugin", loader)
plugin = importlib.util.module_from_spec(spec)
loader.exec_module(plugin)
out = []
for case in json.load(sys.stdin):
    try:
        filt = plugin.Filter(case["enabled"] or [], case["disabled"] or [])
        if case["prefix"]:
            out.append(str(plugin.BatchBuilder(case["prefix"], filt.allows).enabled(case["name"])))
        else:
            out.append(str(filt.allows(case["name"])))
    except ValueError as e:
        out.append("error: " + str(e))
json.dump(out, sys.stdout)
`

func TestFilterAgreesWithTheHost(t *testing.T) {
	requirePython(t)
	type filterCase struct {
		Enabled  []string `json:"enabled"`
		Disabled []string `json:"disabled"`
		Name     string   `json:"name"`
		// Prefix is the metric_prefix: the host filters the exposed name,
		// Prefix+Name, and the plugin's pushdown must agree.
		Prefix string `json:"prefix"`
	}
	var cases []filterCase
	names := []string{"pyexample_load_average", "vendor_pyexample_load_average", "pyexample_context_switches_total",
		"pyexample_forks_total", "a*b", "axb", "]x", "-", "b", "x_total", "x"}
	patterns := [][]string{
		nil, {"pyexample_*"}, {"pyexample_[a-l]oad*"}, {"pyexample_[^l]oad*"}, {"py?xample_forks"},
		{"pyexample_context_switches"}, {"pyexample_forks_total"}, {`a\*b`}, {`[\]]x`}, {`[a\-c]`}, {"[a-c]"},
		{"*_total"}, {"x"}, {"vendor_*", "pyexample_load_average"}, {"*"},
	}
	for _, name := range names {
		for _, enabled := range patterns {
			cases = append(cases, filterCase{Enabled: enabled, Name: name})
			for _, disabled := range patterns[1:4] {
				cases = append(cases, filterCase{Enabled: enabled, Disabled: disabled, Name: name})
			}
		}
	}
	for _, name := range names {
		for _, enabled := range patterns {
			cases = append(cases, filterCase{Enabled: enabled, Name: name, Prefix: "vendor_"})
		}
	}
	for _, bad := range []string{"[", "[]", `a\`, "[^]", "[a"} {
		cases = append(cases, filterCase{Enabled: []string{bad}, Name: "a"})
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", pythonFilter)
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python filter: %v\n%s", err, stderr.String())
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("python filter answered %q (%v), want %d answers", out, err, len(cases))
	}
	for i, c := range cases {
		f, err := metricfilter.New(c.Enabled, c.Disabled)
		want := "error"
		if err == nil {
			want = "False"
			if f.Allow(c.Prefix + c.Name) {
				want = "True"
			}
		}
		if g, _, _ := strings.Cut(got[i], ":"); g != want {
			t.Errorf("enabled %q, disabled %q, prefix %q, name %q: plugin %s, host %s (%v)", c.Enabled, c.Disabled, c.Prefix, c.Name, got[i], want, err)
		}
	}
	t.Logf("%d cases agree", len(cases))
}

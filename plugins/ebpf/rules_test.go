package main

import (
	"os"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/crusoenames"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

const rulesFile = "rules/ebpf-recording-rules.yml"

// TestRecordingRules runs promtool check rules on the shipped rules file,
// and checks that every family a rule reads is one the plugin exports.
func TestRecordingRules(t *testing.T) {
	sdktest.PromtoolRules(t, rulesFile)
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
		if d.Type == descDiskReadHist.Type {
			for _, s := range []string{"_sum", "_count", "_bucket"} {
				known[d.Name+s] = true
			}
		}
	}
	for _, line := range strings.Split(string(rules), "\n") {
		_, expr, ok := strings.Cut(line, "expr: ")
		if !ok {
			continue
		}
		for _, tok := range strings.FieldsFunc(expr, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if strings.Contains(tok, "_") && !known[tok] {
				t.Errorf("rule reads unknown family %s", tok)
			}
		}
	}
}

// TestRecordingRulesOutput runs promtool test rules: the rules produce the
// Crusoe names from the plugin's.
func TestRecordingRulesOutput(t *testing.T) {
	sdktest.PromtoolTestRules(t, "testdata", "ebpf-recording-rules.test.yml")
}

// TestRulesInputIsThePluginsOutput: deploy/prometheus evaluates every
// shipped rule file on testdata/ebpf.prom as this plugin's output; it must
// carry the families and labels the plugin really exports.
func TestRulesInputIsThePluginsOutput(t *testing.T) {
	sdktest.ExpositionMatchesCatalogue(t, "../../deploy/prometheus/testdata/ebpf.prom", catalogue)
}

// TestCrusoeNamesWithPrefix: every name docs/crusoe-names.md says
// metric_prefix crusoe_vm_ gives this plugin is one of its families.
func TestCrusoeNamesWithPrefix(t *testing.T) {
	crusoenames.CheckPrefixFamilies(t, "../../docs/crusoe-names.md", "ebpf", catalogue)
}

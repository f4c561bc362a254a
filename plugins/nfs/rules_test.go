package main

import (
	"os"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/crusoenames"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestRecordingRules runs promtool check rules on the shipped rules file.
func TestRecordingRules(t *testing.T) {
	sdktest.PromtoolRules(t, "nfs-recording-rules.yml")
	// Every family a rule reads must be one the plugin exports.
	rules, err := os.ReadFile("nfs-recording-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
	}
	for _, line := range strings.Split(string(rules), "\n") {
		_, expr, ok := strings.Cut(line, "expr: ")
		if !ok {
			continue
		}
		for _, tok := range strings.FieldsFunc(expr, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if strings.HasPrefix(tok, "nfs_") && !known[tok] {
				t.Errorf("rule reads unknown family %s", tok)
			}
		}
	}
}

// TestRecordingRulesOutput runs promtool test rules: the rules must produce
// the Crusoe names, labels and units (testdata/nfs-recording-rules.test.yml).
func TestRecordingRulesOutput(t *testing.T) {
	sdktest.PromtoolTestRules(t, "testdata", "nfs-recording-rules.test.yml")
}

// TestRulesInputIsThePluginsOutput: deploy/prometheus evaluates every
// shipped rule file on testdata/nfs.prom as this plugin's output; it must
// carry the families and labels the plugin really exports.
func TestRulesInputIsThePluginsOutput(t *testing.T) {
	sdktest.ExpositionMatchesCatalogue(t, "../../deploy/prometheus/testdata/nfs.prom", catalogue)
}

// TestCrusoeNamesWithPrefix: every name docs/crusoe-names.md says
// metric_prefix crusoe_vm_ gives this plugin is one of its families.
func TestCrusoeNamesWithPrefix(t *testing.T) {
	crusoenames.CheckPrefixFamilies(t, "../../docs/crusoe-names.md", "nfs", catalogue)
}

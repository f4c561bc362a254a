package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/crusoenames"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

const ruleFile = "plexporter-guest.rules.yml"

func TestPromtoolCheckRules(t *testing.T) {
	sdktest.PromtoolRules(t, ruleFile)
}

// TestPromtoolTestRules evaluates the recording rules on series shaped like
// the vm fixture's output (testdata/rules.test.yml).
func TestPromtoolTestRules(t *testing.T) {
	sdktest.PromtoolTestRules(t, "testdata", "rules.test.yml")
}

// TestRulesUseCataloguedMetrics catches a rule that reads a family the
// plugin does not export (a typo would just record nothing).
func TestRulesUseCataloguedMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
	}
	b, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	expr := regexp.MustCompile(`(?m)^\s+expr: (.*)$`)
	family := regexp.MustCompile(`\b[a-z_]+_(?:total|bytes|ratio|running|blocked|used|inodes|seconds|success)\b`)
	n := 0
	for _, m := range expr.FindAllStringSubmatch(string(b), -1) {
		for _, name := range family.FindAllString(m[1], -1) {
			n++
			if !known[name] {
				t.Errorf("%s reads %s, which the plugin does not export", ruleFile, name)
			}
		}
	}
	if n < 20 {
		t.Errorf("%s: found only %d plugin families in its expressions", ruleFile, n)
	}
}

// TestRulesInputIsThePluginsOutput: deploy/prometheus evaluates every
// shipped rule file on testdata/guest.prom as this plugin's output; it must
// carry the families and labels the plugin really exports.
func TestRulesInputIsThePluginsOutput(t *testing.T) {
	sdktest.ExpositionMatchesCatalogue(t, "../../deploy/prometheus/testdata/guest.prom", catalogue)
}

// TestCrusoeNamesWithPrefix: every name docs/crusoe-names.md says
// metric_prefix crusoe_vm_ gives this plugin is one of its families.
func TestCrusoeNamesWithPrefix(t *testing.T) {
	crusoenames.CheckPrefixFamilies(t, "../../docs/crusoe-names.md", "guest", catalogue)
}

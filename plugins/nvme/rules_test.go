package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/crusoenames"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

var ruleFiles = []string{"plexporter-nvme.rules.yml", "plexporter-nvme.alerts.yml"}

func TestPromtoolCheckRules(t *testing.T) {
	sdktest.PromtoolRules(t, ruleFiles...)
}

// TestPromtoolTestRules evaluates the recording rules and alert examples on
// series shaped like the failing fixture (testdata/rules.test.yml).
func TestPromtoolTestRules(t *testing.T) {
	sdktest.PromtoolTestRules(t, "testdata", "rules.test.yml")
}

// TestRulesUseCataloguedMetrics catches a rule that refers to a family the
// plugin does not export (a typo would just record nothing).
func TestRulesUseCataloguedMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
	}
	ref := regexp.MustCompile(`\bnvme_[a-z_]+\b`)
	for _, f := range ruleFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range ref.FindAllString(string(b), -1) {
			n++
			if !known[name] {
				t.Errorf("%s refers to %s, which the plugin does not export", f, name)
			}
		}
		if n == 0 {
			t.Errorf("%s refers to no plugin metric", f)
		}
	}
}

// TestRulesInputIsThePluginsOutput: deploy/prometheus evaluates every
// shipped rule file on testdata/nvme.prom as this plugin's output; it must
// carry the families and labels the plugin really exports.
func TestRulesInputIsThePluginsOutput(t *testing.T) {
	sdktest.ExpositionMatchesCatalogue(t, "../../deploy/prometheus/testdata/nvme.prom", catalogue)
}

// TestCrusoeNamesWithPrefix: every name docs/crusoe-names.md says
// metric_prefix crusoe_vm_ gives this plugin is one of its families.
func TestCrusoeNamesWithPrefix(t *testing.T) {
	crusoenames.CheckPrefixFamilies(t, "../../docs/crusoe-names.md", "nvme", catalogue)
}

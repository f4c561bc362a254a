package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

var ruleFiles = []string{"plexporter-nixl.alerts.yml"}

func TestPromtoolCheckRules(t *testing.T) {
	sdktest.PromtoolRules(t, ruleFiles...)
}

// TestPromtoolTestRules fires and withholds each example alert on series
// shaped like the plugin's output (testdata/rules.test.yml).
func TestPromtoolTestRules(t *testing.T) {
	sdktest.PromtoolTestRules(t, "testdata", "rules.test.yml")
}

// TestRulesUseCataloguedMetrics catches a rule that refers to a family the
// plugin does not export (a typo would just never fire).
func TestRulesUseCataloguedMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
	}
	ref := regexp.MustCompile(`\b(?:nixl|agent)_[a-z_]+_total\b|\bnixl_[a-z_]+\b`)
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

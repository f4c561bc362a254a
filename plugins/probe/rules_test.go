package main

import (
	"os"
	"regexp"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

const ruleFile = "plexporter-probe.rules.yml"

func TestPromtoolCheckRules(t *testing.T) {
	sdktest.PromtoolRules(t, ruleFile)
}

// TestPromtoolTestRules evaluates the recording rules on series shaped like
// the plugin's output (testdata/rules.test.yml).
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
	// The expressions are block scalars (expr: |): read them as YAML.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	// Families, not the label names and values beside them (probe, target).
	family := regexp.MustCompile(`\b[a-z_]+_(?:total|seconds|success)\b`)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, name := range family.FindAllString(r.Expr, -1) {
				n++
				if !known[name] {
					t.Errorf("%s reads %s, which the plugin does not export", ruleFile, name)
				}
			}
		}
	}
	if n < 4 {
		t.Errorf("%s: found only %d plugin families in its expressions", ruleFile, n)
	}
}

// TestRulesInputIsThePluginsOutput: deploy/prometheus evaluates every
// shipped rule file on testdata/probe.prom as this plugin's output; it must
// carry the families and labels the plugin really exports.
func TestRulesInputIsThePluginsOutput(t *testing.T) {
	sdktest.ExpositionMatchesCatalogue(t, "../../deploy/prometheus/testdata/probe.prom", catalogue)
}

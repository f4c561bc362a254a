// Package prometheus holds plexporter's Prometheus alert rules
// (plexporter-alerts.yml) and their unit tests (plexporter-alerts.test.yml).
// deploy/grafana's test also evaluates them on make demo's data.
package prometheus

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

const (
	alerts     = "plexporter-alerts.yml"
	alertTests = "plexporter-alerts.test.yml"
	nvmeAlerts = "../../plugins/nvme/plexporter-nvme.alerts.yml"
)

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr string
			Labels              map[string]string
			Annotations         map[string]string
		}
	}
}

type testFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string
		AlertRuleTest []struct {
			Alertname string
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	}
}

func load(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	sdktest.PromtoolRules(t, alerts)
}

func TestPromtoolTestRules(t *testing.T) {
	if out, err := exec.Command(sdktest.PromtoolBinary(t), "test", "rules", alertTests).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Every alert says how bad it is and what happened, is tested firing, and
// does not take a name of the nvme plugin's alerts, which load beside it.
func TestEveryAlertIsDescribedAndTested(t *testing.T) {
	var rules, nvme ruleFile
	var tests testFile
	load(t, alerts, &rules)
	load(t, nvmeAlerts, &nvme)
	load(t, alertTests, &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	taken := map[string]bool{}
	for _, g := range nvme.Groups {
		for _, r := range g.Rules {
			taken[r.Alert] = true
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (recording rules live beside their plugin)", g.Name)
				continue
			}
			n++
			if taken[r.Alert] {
				t.Errorf("%s: taken twice (here or by %s)", r.Alert, nvmeAlerts)
			}
			taken[r.Alert] = true
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
			if !fires[r.Alert] {
				t.Errorf("%s: no test in %s where it fires", r.Alert, alertTests)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts")
	}
}

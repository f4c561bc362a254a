// Package grafana holds the Grafana dashboards of plexporter and its
// shipped plugins (*.json) and their test: every panel's query runs, with
// no error and a non-empty result, against a real Prometheus that scraped
// make demo's host.
package grafana

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/dev/demo/demotest"
	"github.com/plexporter/plexporter/internal/testkit/dashboardtest"
	"github.com/plexporter/plexporter/internal/testkit/hosttest"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func loadDashboards(t *testing.T) map[string]dashboardtest.Dashboard {
	t.Helper()
	files, _ := filepath.Glob("*.json")
	if len(files) == 0 {
		t.Fatal("no dashboards")
	}
	out := map[string]dashboardtest.Dashboard{}
	for _, f := range files {
		out[f] = dashboardtest.Load(t, f)
	}
	return out
}

func TestDashboardsAreWellFormed(t *testing.T) {
	uids := map[string]string{}
	for file, d := range loadDashboards(t) {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: no uid or title", file)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share uid %s", file, other, d.UID)
		}
		uids[d.UID] = file
		if qs := dashboardtest.PanelQueries(t, file, d); len(qs) == 0 {
			t.Errorf("%s: no queries", file)
		}
		dashboardtest.VariableQueries(t, file, d)
	}
}

// Every panel's and variable's query, against a real Prometheus that
// scraped the demo: no error, no empty result. The alert and recording
// rules are loaded too, and each must evaluate without error.
func TestEveryQueryAnswersOnTheDemo(t *testing.T) {
	prom := sdktest.PrometheusBinary(t, "prometheus")
	h := demotest.Start(t, "../..")
	rules, _ := filepath.Glob("../prometheus/*.yml")
	rules = slices.DeleteFunc(rules, func(f string) bool { return strings.HasSuffix(f, ".test.yml") })
	rules = append(rules, "../../plugins/nvme/plexporter-nvme.alerts.yml", "../../plugins/nvme/plexporter-nvme.rules.yml", "../../plugins/nfs/nfs-recording-rules.yml")
	promURL := dashboardtest.StartPrometheus(t, prom, h.Addr, rules...)

	hosttest.WaitFor(t, 60*time.Second, "five scrapes of the demo", func() bool {
		r, err := dashboardtest.Instant(promURL, `count_over_time(up{job="plexporter"}[1m]) >= 5`)
		return err == nil && len(r) == 1
	})
	for file, d := range loadDashboards(t) {
		dashboardtest.CheckAnswers(t, promURL, file, d)
	}
	checkRuleHealth(t, promURL)
	checkNoExporterAlert(t, promURL)
	checkFamiliesExist(t, h.Get(t, "/metrics"), rules)
	if t.Failed() {
		t.Logf("demo exposition:\n%s", h.Get(t, "/metrics"))
	}
}

// checkRuleHealth waits until every loaded rule has been evaluated and
// fails for each whose evaluation failed.
func checkRuleHealth(t *testing.T, promURL string) {
	t.Helper()
	type rule struct{ Name, Health, LastError, Type string }
	var groups []struct {
		File  string
		Rules []rule
	}
	hosttest.WaitFor(t, 30*time.Second, "every rule evaluated", func() bool {
		var body struct {
			Data struct {
				Groups []struct {
					File  string
					Rules []rule
				}
			}
		}
		if err := dashboardtest.GetJSON(promURL+"/api/v1/rules", &body); err != nil {
			return false
		}
		groups = body.Data.Groups
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Health == "unknown" {
					return false
				}
			}
		}
		return len(groups) > 0
	})
	n := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("%s: rule %s: %s %s", g.File, r.Name, r.Health, r.LastError)
			}
		}
	}
	if n == 0 {
		t.Error("Prometheus loaded no rule")
	}
}

// failureOnly are the host's self-metrics that exist only while something
// is wrong (README "Self-metrics"), so the healthy demo has none of them.
var failureOnly = []string{
	"plexporter_plugin_refused", "plexporter_plugin_next_start_timestamp_seconds",
	"plexporter_dropped_series_total", "plexporter_plugin_collect_errors_total",
}

// family matches the plexporter and plugin metric names a query or rule
// reads.
var family = regexp.MustCompile(`\b(?:plexporter|rdma|ethtool|nfs|nvme)_[a-z0-9_]+\b`)

// checkFamiliesExist fails for every family a dashboard or rule names that
// the demo does not serve: a typo in a rule would record or alert nothing,
// forever. (The dashboards' queries are also checked for results.)
func checkFamiliesExist(t *testing.T, exposition string, rules []string) {
	t.Helper()
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(exposition, -1) {
		served[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`[{,]([a-z_]+)="`).FindAllStringSubmatch(exposition, -1) {
		served[m[1]] = true // label names (nfs_operation) match the pattern too
	}
	var texts []string
	for _, f := range rules {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Comments aside (they may name labels of other exporters).
		texts = append(texts, regexp.MustCompile(`(?m)#.*$`).ReplaceAllString(string(b), ""))
	}
	for file, d := range loadDashboards(t) {
		for _, q := range dashboardtest.PanelQueries(t, file, d) {
			texts = append(texts, q.Expr)
		}
	}
	missing := map[string]bool{}
	for _, text := range texts {
		for _, name := range family.FindAllString(text, -1) {
			if !served[name] && !slices.Contains(failureOnly, name) {
				missing[name] = true
			}
		}
	}
	for name := range missing {
		t.Errorf("a dashboard or rule reads %s, which the demo does not serve", name)
	}
}

// missedDeadline are the host's alerts whose condition is a scrape or a
// collect that failed or ran long: on a machine loaded by other work a
// healthy host misses a deadline now and then, and the alert goes pending
// (none can fire within the test: each has a for: of minutes). That is the
// rule doing its job, not a rule that misreads the healthy demo.
var missedDeadline = []string{
	"PlexporterDown", "PlexporterPluginCollectsFailing",
	"PlexporterPluginCollectNearTimeout", "PlexporterScrapeNearTimeout",
}

// checkNoExporterAlert: the demo is a healthy host, so none of the host's
// own alerts may fire on it (the unsandboxed one aside when the test is not
// root). The alerts with a for: cannot fire in the test's minute, so a
// pending one fails too, since its condition holds on the healthy demo,
// unless its condition is a missed deadline (missedDeadline), which only
// the machine's load explains.
func checkNoExporterAlert(t *testing.T, promURL string) {
	t.Helper()
	q := `ALERTS{alertname=~"Plexporter.*"}`
	if os.Geteuid() != 0 {
		q = `ALERTS{alertname=~"Plexporter.*", alertname!="PlexporterPluginNotSandboxed"}`
	}
	res, err := dashboardtest.Instant(promURL, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		name, state := r.Metric["alertname"], r.Metric["alertstate"]
		if state == "pending" && slices.Contains(missedDeadline, name) {
			t.Logf("pending on this loaded machine (a missed deadline, not a misread of the demo): %s %v", name, r.Metric)
			continue
		}
		t.Errorf("the healthy demo raises %s (%s): %v", name, state, r.Metric)
	}
}

// Package grafana holds the Grafana dashboards of plexporter and its
// shipped plugins (*.json) and their test: every panel's query runs, with
// no error and a non-empty result, against a real Prometheus that scraped
// make demo's host.
package grafana

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/demo/demotest"
	"github.com/plexporter/plexporter/sdk/sdktest"

	"github.com/plexporter/plexporter/internal/syncbuf"
)

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	UID, Title string
	Panels     []panel
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
			Datasource *datasource
		}
	}
}

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *datasource
	Panels     []panel // a collapsed row's
	Targets    []struct {
		Expr, RefID string
		Datasource  *datasource
	}
}

type datasource struct{ Type, UID string }

// query is one PromQL expression of a dashboard, and where it is.
type query struct{ where, expr string }

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, _ := filepath.Glob("*.json")
	if len(files) == 0 {
		t.Fatal("no dashboards")
	}
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = d
	}
	return out
}

// panelQueries lists every target of every panel (rows included) and
// checks what Grafana needs to show them: unique panel ids, the
// dashboard's datasource variable, a refId per target.
func panelQueries(t *testing.T, file string, d dashboard) []query {
	t.Helper()
	var out []query
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d used twice", file, p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: panel %q does not use the ${datasource} variable", file, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: panel %q: refId %q missing or repeated", file, p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
				out = append(out, query{fmt.Sprintf("%s: panel %q, query %s", file, p.Title, tg.RefID), tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return out
}

// labelValues matches a query variable's label_values(<expr>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// variableQueries returns each query variable's expression and label, and
// checks the variables the panels use exist.
func variableQueries(t *testing.T, file string, d dashboard) (qs []query, labels []string) {
	t.Helper()
	names := map[string]bool{}
	for _, v := range d.Templating.List {
		names[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q string
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(<expr>, <label>)", file, v.Name, q)
			continue
		}
		qs = append(qs, query{fmt.Sprintf("%s: variable %s", file, v.Name), m[1]})
		labels = append(labels, m[2])
	}
	if !names["datasource"] {
		t.Errorf("%s: no datasource variable", file)
	}
	for _, q := range panelQueries(t, file, d) {
		for _, m := range regexp.MustCompile(`\$\{?([a-z_]+)`).FindAllStringSubmatch(q.expr, -1) {
			if !names[m[1]] && !strings.HasPrefix(m[1], "__") {
				t.Errorf("%s uses $%s, which the dashboard does not define", q.where, m[1])
			}
		}
	}
	return qs, labels
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
		if qs := panelQueries(t, file, d); len(qs) == 0 {
			t.Errorf("%s: no queries", file)
		}
		variableQueries(t, file, d)
	}
}

// substitute replaces Grafana's variables as the dashboard would with "All"
// selected (.* for the regex matchers the dashboards use), and the range
// variables with a window that holds several of the test's 1 s scrapes.
func substitute(expr string) string {
	return regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?`).ReplaceAllString(
		regexp.MustCompile(`\$\{?([a-z_]+)\}?`).ReplaceAllStringFunc(expr, func(v string) string {
			if strings.Contains(v, "__") {
				return v
			}
			return ".*"
		}), "30s")
}

func TestSubstitute(t *testing.T) {
	got := substitute(`rate(x{job=~"$job", device=~"${device}"}[$__rate_interval]) / 1e6`)
	if want := `rate(x{job=~".*", device=~".*"}[30s]) / 1e6`; got != want {
		t.Errorf("substitute = %s, want %s", got, want)
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
	promURL := startPrometheus(t, prom, h.URL, rules)

	waitFor(t, 60*time.Second, "five scrapes of the demo", func() bool {
		r, err := instant(promURL, `count_over_time(up{job="plexporter"}[1m]) >= 5`)
		return err == nil && len(r) == 1
	})
	for file, d := range loadDashboards(t) {
		vqs, labels := variableQueries(t, file, d)
		for i, q := range vqs {
			res, err := instant(promURL, substitute(q.expr))
			if err != nil {
				t.Errorf("%s: %s: %v", q.where, q.expr, err)
				continue
			}
			if !slices.ContainsFunc(res, func(r result) bool { return r.Metric[labels[i]] != "" }) {
				t.Errorf("%s: %s gives no value of %s on the demo", q.where, q.expr, labels[i])
			}
		}
		for _, q := range panelQueries(t, file, d) {
			res, err := instant(promURL, substitute(q.expr))
			switch {
			case err != nil:
				t.Errorf("%s: %s: %v", q.where, q.expr, err)
			case len(res) == 0:
				t.Errorf("%s: %s: empty on the demo", q.where, substitute(q.expr))
			}
		}
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
	waitFor(t, 30*time.Second, "every rule evaluated", func() bool {
		var body struct {
			Data struct {
				Groups []struct {
					File  string
					Rules []rule
				}
			}
		}
		if err := getJSON(promURL+"/api/v1/rules", &body); err != nil {
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
		for _, q := range panelQueries(t, file, d) {
			texts = append(texts, q.expr)
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

// checkNoExporterAlert: the demo is a healthy host, so none of the host's
// own alerts may fire or even be pending on it (the unsandboxed one aside
// when the test is not root).
func checkNoExporterAlert(t *testing.T, promURL string) {
	t.Helper()
	q := `ALERTS{alertname=~"Plexporter.*"}`
	if os.Geteuid() != 0 {
		q = `ALERTS{alertname=~"Plexporter.*", alertname!="PlexporterPluginNotSandboxed"}`
	}
	res, err := instant(promURL, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Errorf("the healthy demo raises %s (%s): %v", r.Metric["alertname"], r.Metric["alertstate"], r.Metric)
	}
}

type result struct {
	Metric map[string]string
	Value  []any
}

// instant runs an instant query; an error is Prometheus's (bad PromQL).
func instant(promURL, q string) ([]result, error) {
	var body struct {
		Status, Error string
		Data          struct {
			ResultType string
			Result     json.RawMessage
		}
	}
	if err := getJSON(promURL+"/api/v1/query?query="+url.QueryEscape(q), &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s", body.Error)
	}
	var res []result
	switch body.Data.ResultType {
	case "vector", "matrix":
		if err := json.Unmarshal(body.Data.Result, &res); err != nil {
			return nil, err
		}
	case "scalar":
		res = []result{{Metric: map[string]string{}}}
	}
	return res, nil
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w: %s", u, err, b)
	}
	return nil
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// startPrometheus runs Prometheus scraping the host every second as job
// plexporter, evaluating rules every second, and returns its URL.
func startPrometheus(t *testing.T, bin, hostURL string, rules []string) string {
	t.Helper()
	dir := t.TempDir()
	var ruleList []string
	for _, r := range rules {
		abs, err := filepath.Abs(r)
		if err != nil {
			t.Fatal(err)
		}
		ruleList = append(ruleList, fmt.Sprintf("  - %q", abs))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
%s
scrape_configs:
  - job_name: plexporter
    static_configs:
      - targets: [%q]
`, strings.Join(ruleList, "\n"), strings.TrimPrefix(hostURL, "http://"))), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	return "http://" + addr
}

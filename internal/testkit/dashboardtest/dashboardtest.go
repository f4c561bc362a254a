// Package dashboardtest checks Grafana dashboards the way the project's
// dashboard tests all do: the model is one Grafana shows (unique panel ids,
// the ${datasource} variable on every panel, a refId per target, every
// variable used defined, label_values query variables), and every query
// answers on a real Prometheus that scraped a real host. deploy/grafana
// checks the shipped dashboards on the demo, plugins their own.
package dashboardtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/hosttest"
	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

// Dashboard is the part of Grafana's dashboard model the checks read.
type Dashboard struct {
	UID, Title string
	Panels     []Panel
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
			Datasource *Datasource
		}
	}
}

// Panel is a panel or a row (a collapsed row holds its panels).
type Panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *Datasource
	Panels     []Panel
	Targets    []struct {
		Expr, RefID string
		Datasource  *Datasource
	}
}

// Datasource is a panel's or target's data source reference.
type Datasource struct{ Type, UID string }

// Query is one PromQL expression of a dashboard, and where it is.
type Query struct{ Where, Expr string }

// Load reads the dashboard file.
func Load(t testing.TB, file string) Dashboard {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

// PanelQueries lists every target of every panel (rows included) and
// checks what Grafana needs to show them: unique panel ids, the
// dashboard's datasource variable, a refId per target.
func PanelQueries(t testing.TB, file string, d Dashboard) []Query {
	t.Helper()
	var out []Query
	ids := map[int]bool{}
	var walk func([]Panel)
	walk = func(ps []Panel) {
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
				out = append(out, Query{fmt.Sprintf("%s: panel %q, query %s", file, p.Title, tg.RefID), tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return out
}

// labelValues matches a query variable's label_values(<expr>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

var variableUse = regexp.MustCompile(`\$\{?([a-z_]+)`)

// VariableQueries returns each query variable's expression and label, and
// checks that there is a datasource variable and that every variable the
// panels and variables use is defined.
func VariableQueries(t testing.TB, file string, d Dashboard) (qs []Query, labels []string) {
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
		qs = append(qs, Query{fmt.Sprintf("%s: variable %s", file, v.Name), m[1]})
		labels = append(labels, m[2])
	}
	if !names["datasource"] {
		t.Errorf("%s: no datasource variable", file)
	}
	for _, q := range append(PanelQueries(t, file, d), qs...) {
		for _, m := range variableUse.FindAllStringSubmatch(q.Expr, -1) {
			if !names[m[1]] && !strings.HasPrefix(m[1], "__") {
				t.Errorf("%s uses $%s, which the dashboard does not define", q.Where, m[1])
			}
		}
	}
	return qs, labels
}

var (
	rangeVariable = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?`)
	anyVariable   = regexp.MustCompile(`\$\{?([a-z_]+)\}?`)
)

// Substitute replaces Grafana's variables as the dashboard would with
// "All" selected (.* for the regex matchers the dashboards use), and the
// range variables with a window that holds several of the tests' 1 s
// scrapes.
func Substitute(expr string) string {
	return rangeVariable.ReplaceAllString(
		anyVariable.ReplaceAllStringFunc(expr, func(v string) string {
			if strings.Contains(v, "__") {
				return v
			}
			return ".*"
		}), "30s")
}

// CheckAnswers runs every variable and panel query of the dashboard on
// the Prometheus at promURL: each must succeed, a variable's must give a
// value of its label, a panel's must not be empty.
//
// Every query is evaluated at one instant (Settled), so that a scrape
// ingested between two queries cannot make their answers disagree.
func CheckAnswers(t testing.TB, promURL, file string, d Dashboard) {
	t.Helper()
	at := Settled(t, promURL)
	vqs, labels := VariableQueries(t, file, d)
	for i, q := range vqs {
		res, err := InstantAt(promURL, at, Substitute(q.Expr))
		if err != nil {
			t.Errorf("%s: %s: %v", q.Where, q.Expr, err)
			continue
		}
		if !slices.ContainsFunc(res, func(r Result) bool { return r.Metric[labels[i]] != "" }) {
			t.Errorf("%s: %s gives no value of %s", q.Where, q.Expr, labels[i])
		}
	}
	for _, q := range PanelQueries(t, file, d) {
		res, err := InstantAt(promURL, at, Substitute(q.Expr))
		switch {
		case err != nil:
			t.Errorf("%s: %s: %v", q.Where, q.Expr, err)
		case len(res) == 0:
			t.Errorf("%s: %s: empty", q.Where, Substitute(q.Expr))
		}
	}
}

// StartPrometheus runs the Prometheus binary bin scraping target
// (host:port) every second as job plexporter, evaluating the rule files
// every second, and returns its URL. It stops when the test ends, and its
// log is printed if the test failed.
func StartPrometheus(t testing.TB, bin, target string, rules ...string) string {
	t.Helper()
	promURL, _ := StartPrometheusWithLog(t, bin, target, rules...)
	return promURL
}

// StartPrometheusWithLog is StartPrometheus that also returns Prometheus's
// log (stdout and stderr), for tests of what it complains about.
func StartPrometheusWithLog(t testing.TB, bin, target string, rules ...string) (string, *syncbuf.Buffer) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: plexporter\n    static_configs:\n      - targets: [%q]\n", target)
	if len(rules) > 0 {
		cfg += "rule_files:\n"
		for _, r := range rules {
			abs, err := filepath.Abs(r)
			if err != nil {
				t.Fatal(err)
			}
			cfg += fmt.Sprintf("  - %q\n", abs)
		}
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := hosttest.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	return "http://" + addr, logs
}

// Result is one series of a query's result.
type Result struct {
	Metric map[string]string
	Value  []any
}

// Instant runs an instant query at the current time; an error is
// Prometheus's (bad PromQL) or no answer. It is for polling; numbers a test
// compares are read with InstantAt at one Settled instant.
func Instant(promURL, q string) ([]Result, error) {
	return InstantAt(promURL, "", q)
}

// InstantAt runs an instant query evaluated at the instant at (the query
// API's time parameter, Unix seconds; "" is now).
func InstantAt(promURL, at, q string) ([]Result, error) {
	var body struct {
		Status, Error string
		Data          struct {
			ResultType string
			Result     json.RawMessage
		}
	}
	u := promURL + "/api/v1/query?query=" + url.QueryEscape(q)
	if at != "" {
		u += "&time=" + url.QueryEscape(at)
	}
	if err := GetJSON(u, &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s", body.Error)
	}
	var res []Result
	switch body.Data.ResultType {
	case "vector", "matrix":
		if err := json.Unmarshal(body.Data.Result, &res); err != nil {
			return nil, err
		}
	case "scalar":
		res = []Result{{Metric: map[string]string{}}}
	}
	return res, nil
}

// GetJSON decodes the JSON answer of u (a Prometheus API endpoint) into v.
func GetJSON(u string, v any) error {
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

// Settled returns the instant (Unix seconds, as the query API takes it) at
// which a test evaluates what it compares: that of the oldest of the last
// scrapes Prometheus has ingested of each target. A scrape's samples carry
// its start time but are appended when it ends, so "now" may still lack a
// scrape under way; Prometheus scrapes each target one scrape after the
// other, appending its samples and up together, so at this instant every
// scrape of every target is in and the answers are final. It waits (at
// least hosttest.MinWait) for a first scrape.
func Settled(t testing.TB, promURL string) string {
	t.Helper()
	var at string
	hosttest.WaitFor(t, hosttest.MinWait, "a scrape ingested by Prometheus", func() bool {
		res, err := Instant(promURL, `min(timestamp(up))`)
		if err != nil || len(res) != 1 || len(res[0].Value) != 2 {
			return false
		}
		at, _ = res[0].Value[1].(string)
		return at != ""
	})
	return at
}

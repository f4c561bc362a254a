package prometheus

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/dashboardtest"
	"github.com/plexporter/plexporter/internal/testkit/hosttest"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// repoRoot is the module root, relative to this package.
const repoRoot = "../.."

// shippedRuleFiles are every Prometheus rule file the repository ships: the
// YAML files with a top-level groups: key under deploy/prometheus and
// plugins/, test inputs (testdata/, *.test.yml) aside.
func shippedRuleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"deploy/prometheus", "plugins"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".test.yml") {
				return nil
			}
			var top map[string]any
			load(t, path, &top)
			if _, ok := top["groups"]; ok {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 5 {
		t.Fatalf("found only %d shipped rule files: %v", len(files), files)
	}
	return files
}

// recorded maps every recorded name to the files that record it.
func recorded(t *testing.T, files []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range files {
		var rf ruleFile
		load(t, f, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					out[r.Record] = append(out[r.Record], f)
				}
			}
		}
	}
	return out
}

// No two rules of the shipped files record the same name: loaded together,
// two rules writing one series make Prometheus drop samples ("duplicate
// sample for timestamp", or out-of-order ones) and the series flips between
// two sources.
func TestNoNameRecordedTwice(t *testing.T) {
	for name, files := range recorded(t, shippedRuleFiles(t)) {
		if len(files) > 1 {
			t.Errorf("%s is recorded %d times: %v", name, len(files), files)
		}
	}
}

// realisticInput is testdata/*.prom: each plugin's output as it exports it
// (the plugins' tests hold each file to their catalogue: families, types,
// label names), concatenated into one scrape.
func realisticInput(t *testing.T) string {
	t.Helper()
	files, _ := filepath.Glob("testdata/*.prom")
	if len(files) == 0 {
		t.Fatal("no testdata/*.prom")
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// Every shipped rule file loads into one real Prometheus beside every
// other, each rule evaluates without error, Prometheus drops no rule
// result, and every recording rule records at least one series from the
// plugins' realistic output: a rule that records nothing is a failure.
func TestShippedRulesTogetherOnRealisticInput(t *testing.T) {
	prom := sdktest.PrometheusBinary(t, "prometheus")
	files := shippedRuleFiles(t)
	body := realisticInput(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	promURL, logs := dashboardtest.StartPrometheusWithLog(t, prom, strings.TrimPrefix(srv.URL, "http://"), files...)

	type rule struct{ Name, Health, LastError, Type string }
	var groups []struct {
		File  string
		Rules []rule
	}
	// Five evaluations of every group after the first scrape: groups are
	// evaluated at different offsets, so two rules writing one series
	// collide within a few rounds.
	hosttest.WaitFor(t, 60*time.Second, "five scrapes and every rule evaluated", func() bool {
		r, err := dashboardtest.Instant(promURL, `count_over_time(up{job="plexporter"}[1m]) >= 5`)
		if err != nil || len(r) != 1 {
			return false
		}
		var resp struct {
			Data struct {
				Groups []struct {
					File  string
					Rules []rule
				}
			}
		}
		if err := dashboardtest.GetJSON(promURL+"/api/v1/rules", &resp); err != nil {
			return false
		}
		groups = resp.Data.Groups
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Health == "unknown" {
					return false
				}
			}
		}
		return len(groups) > 0
	})
	loaded := map[string]bool{}
	for _, g := range groups {
		loaded[filepath.Base(g.File)] = true
		for _, r := range g.Rules {
			if r.Health != "ok" {
				t.Errorf("%s: rule %s: %s %s", g.File, r.Name, r.Health, r.LastError)
			}
		}
	}
	for _, f := range files {
		if !loaded[filepath.Base(f)] {
			t.Errorf("%s: Prometheus loaded no group of it", f)
		}
	}
	names := recorded(t, files)
	if len(names) == 0 {
		t.Fatal("no recording rules")
	}
	for name, in := range names {
		res, err := dashboardtest.Instant(promURL, name)
		switch {
		case err != nil:
			t.Errorf("%s (%v): %v", name, in, err)
		case len(res) == 0:
			t.Errorf("%s (%v): records no series from the plugins' output (testdata/*.prom)", name, in)
		}
	}
	// The scrape never changes, so neither may a recorded series: one that
	// does is written by two rules with different values (groups are
	// evaluated at different offsets, so the writers interleave rather than
	// collide on one timestamp).
	for name, in := range names {
		res, err := dashboardtest.Instant(promURL, `changes(`+name+`[1m]) > 0`)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			t.Errorf("%s (%v): changed %v times on a constant input: written by more than one rule: %v", name, in, r.Value[1], r.Metric)
		}
	}
	dropped := regexp.MustCompile(`(?i)duplicate sample|same timestamp|out.of.order|out of bounds`)
	for _, line := range strings.Split(logs.String(), "\n") {
		if dropped.MatchString(line) {
			t.Errorf("Prometheus dropped rule results: %s", line)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// nodeExporterFixtures are node_exporter's own textfile collector cases
// (collector/fixtures/textfile/), read in place: they are public test data
// kept outside the repository, next to it.
const nodeExporterFixtures = "../../../shared/fixtures/node_exporter-textfile"

// nodeExporterCase is one case: the directories node_exporter read and
// what this plugin deliberately does otherwise.
type nodeExporterCase struct {
	dirs []string // relative to the fixtures; default: the case's own
	// refused are node_exporter's samples (keys of samples()) that the
	// plugin leaves out, with why.
	refused map[string]string
	// scrapeError is the plugin's textfile_scrape_error where it differs
	// from node_exporter's, with why ("" when they agree).
	scrapeError string
}

var nodeExporterCases = map[string]nodeExporterCase{
	"client_side_timestamp":     {},
	"different_metric_types":    {},
	"glob_extra_dimension":      {dirs: []string{"histogram_extra_dimension", "summary_extra_dimension"}},
	"histogram":                 {},
	"histogram_extra_dimension": {},
	"inconsistent_metrics": {
		refused: map[string]string{
			"go_goroutines{foo=}":    "go_ is the host's own prefix: the family is refused, counted as reserved",
			"go_goroutines{foo=bar}": "go_ is the host's own prefix",
		},
		scrapeError: "the refused go_goroutines is an error of this scrape",
	},
	"metrics_merge_different_help": {},
	"metrics_merge_empty_help":     {},
	"metrics_merge_no_help":        {},
	"metrics_merge_same_help":      {},
	"no_metric_files":              {},
	"nonexistent_path":             {dirs: []string{"nonexistent_path"}},
	"summary":                      {},
	"summary_extra_dimension":      {},
	"two_metric_files":             {},
}

// TestNodeExporterFixtures feeds every case of node_exporter's textfile
// collector to the plugin and compares the samples, as numbers, and the
// help texts with node_exporter's output: node_textfile_* is
// textfile_*, and each file's mtime is there (node_exporter's test fixes
// it to 1 s, so its value is not compared). The deliberate differences are
// in nodeExporterCases.
func TestNodeExporterFixtures(t *testing.T) {
	if _, err := os.Stat(nodeExporterFixtures); err != nil {
		t.Skipf("node_exporter's textfile fixtures are not at %s (public test data kept beside the repository): %v", nodeExporterFixtures, err)
	}
	root, err := filepath.Abs(nodeExporterFixtures)
	if err != nil {
		t.Fatal(err)
	}
	outs, _ := filepath.Glob(filepath.Join(root, "*.out"))
	if len(outs) != len(nodeExporterCases) {
		t.Errorf("%d cases in %s, %d known to this test", len(outs), root, len(nodeExporterCases))
	}
	for _, out := range outs {
		name := strings.TrimSuffix(filepath.Base(out), ".out")
		t.Run(name, func(t *testing.T) {
			c, ok := nodeExporterCases[name]
			if !ok {
				t.Fatalf("case %s is not known to this test: add it to nodeExporterCases", name)
			}
			if c.dirs == nil {
				c.dirs = []string{name}
			}
			var dirs []string
			for _, d := range c.dirs {
				dirs = append(dirs, filepath.Join(root, d))
			}
			res := sdktest.Run(t, testPlugin(), opts(dirs...))
			gotFams := res.Families(t)
			got := samples(gotFams)
			want := samples(parseOut(t, out))

			// The file label: node_exporter's is the path its test gave,
			// fixtures/textfile/<dir>/<file>; ours is the real path.
			rename := func(s string) string {
				return strings.ReplaceAll(s, "fixtures/textfile/", root+"/")
			}
			for k, v := range want {
				k = rename(k)
				if strings.HasPrefix(k, "node_textfile_mtime_seconds{") {
					k = strings.Replace(k, "node_textfile_", "textfile_", 1)
					if _, ok := got[k]; !ok {
						t.Errorf("missing %s", k)
					}
					continue
				}
				if why, ok := c.refused[k]; ok {
					if _, ok := got[k]; ok {
						t.Errorf("%s is served; it should be refused: %s", k, why)
					}
					continue
				}
				if k == "node_textfile_scrape_error{}" {
					k = "textfile_scrape_error{}"
					if c.scrapeError != "" {
						v = 1 - v
					}
				}
				g, ok := got[k]
				switch {
				case !ok:
					t.Errorf("missing %s (node_exporter: %v)", k, v)
				case g != v:
					t.Errorf("%s = %v, node_exporter: %v", k, g, v)
				}
			}
			for k, v := range got {
				if strings.HasPrefix(k, "textfile_") && !strings.HasPrefix(k, "textfile_mtime_seconds") && k != "textfile_scrape_error{}" {
					continue // the plugin's own counters
				}
				if _, ok := want[strings.ReplaceAll(strings.Replace(k, "textfile_", "node_textfile_", 1), root+"/", "fixtures/textfile/")]; !ok {
					if _, ok := want[strings.ReplaceAll(k, root+"/", "fixtures/textfile/")]; !ok {
						t.Errorf("extra sample %s %v", k, v)
					}
				}
			}
			gotHelp := helps(gotFams)
			for fam, help := range helps(parseOut(t, out)) {
				if strings.HasPrefix(fam, "node_textfile_") {
					continue
				}
				if _, refused := c.refused[fam+"{foo=}"]; refused {
					continue
				}
				if g := gotHelp[fam]; g != rename(help) {
					t.Errorf("%s: help %q, node_exporter: %q", fam, g, rename(help))
				}
			}
		})
	}
}

// parseOut reads a node_exporter .out file.
func parseOut(t *testing.T, path string) []*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	byName, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var mfs []*dto.MetricFamily
	for _, mf := range byName {
		mfs = append(mfs, mf)
	}
	return mfs
}

package sdktest

import (
	"os"
	"slices"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/sdk"
)

// ExpositionMatchesCatalogue fails unless every family of the text
// exposition at path is one of the catalogue's, of its type, and its
// samples together carry exactly the catalogue's label names (a sample may
// lack a label whose value is empty). Fixtures that stand for a plugin's
// output elsewhere in the repository (the rule files' realistic input in
// deploy/prometheus/testdata) call it from the plugin's tests, so that a
// label or family added to the plugin cannot leave them behind.
func ExpositionMatchesCatalogue(t testing.TB, path string, catalogue []*sdk.Desc) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(families) == 0 {
		t.Fatalf("%s: no families", path)
	}
	known := map[string]*sdk.Desc{}
	for _, d := range catalogue {
		known[d.Name] = d
	}
	for name, mf := range families {
		d, ok := known[name]
		if !ok {
			t.Errorf("%s: family %s is not in the plugin's catalogue", path, name)
			continue
		}
		if got, want := mf.GetType().String(), promType(d.Type); got != want {
			t.Errorf("%s: %s is a %s, the catalogue says %s", path, name, got, want)
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(d.Labels, l.GetName()) {
					t.Errorf("%s: %s has label %s, not in the catalogue's %v", path, name, l.GetName(), d.Labels)
				}
				seen[l.GetName()] = true
			}
		}
		for _, l := range d.Labels {
			if !seen[l] {
				t.Errorf("%s: no sample of %s has the label %s (catalogue: %v): the fixture is older than the plugin", path, name, l, d.Labels)
			}
		}
	}
}

func promType(t sdk.Type) string {
	switch t {
	case sdk.Counter:
		return "COUNTER"
	case sdk.Gauge:
		return "GAUGE"
	case sdk.Histogram:
		return "HISTOGRAM"
	case sdk.Summary:
		return "SUMMARY"
	}
	return "UNTYPED"
}

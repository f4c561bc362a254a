package prometheus

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/crusoenames"
)

// crusoeNames is how many names the Crusoe metrics exporter has
// (docs/crusoe-names.md says which).
const crusoeNames = 93

// TestCrusoeNamesTable: docs/crusoe-names.md lists the 93 Crusoe names,
// each recorded by the rule file its row names (a histogram as _bucket,
// _sum and _count) and by no other; every crusoe_vm_ name a shipped rule
// file records is in the table. TestShippedRulesTogetherOnRealisticInput
// makes sure each of those rules records series. (Each plugin's tests
// check the metric_prefix column against its catalogue.)
func TestCrusoeNamesTable(t *testing.T) {
	rows, err := crusoenames.Load(filepath.Join(repoRoot, "docs/crusoe-names.md"))
	if err != nil {
		t.Fatal(err)
	}
	rec := recorded(t, shippedRuleFiles(t))
	inTable := map[string]bool{}
	for _, r := range rows {
		if inTable[r.Name] {
			t.Errorf("%s: listed twice", r.Name)
		}
		inTable[r.Name] = true
		series := []string{r.Name}
		if r.Histogram {
			series = []string{r.Name + "_bucket", r.Name + "_sum", r.Name + "_count"}
		}
		for _, s := range series {
			inTable[s] = true
			files := rec[s]
			if len(files) != 1 || filepath.Clean(files[0]) != filepath.Join(repoRoot, r.RuleFile) {
				t.Errorf("%s: the table says %s records it; recorded by %v", s, r.RuleFile, files)
			}
		}
	}
	if len(rows) != crusoeNames {
		t.Errorf("the table lists %d names, want %d", len(rows), crusoeNames)
	}
	for name, files := range rec {
		if strings.HasPrefix(name, "crusoe_vm_") && !inTable[name] {
			t.Errorf("%s (recorded by %v) is not in docs/crusoe-names.md", name, files)
		}
	}
}

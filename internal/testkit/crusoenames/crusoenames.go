// Package crusoenames reads the table of docs/crusoe-names.md: every name
// of the Crusoe metrics exporter and where plexporter produces it. The
// tests of deploy/prometheus (rule files) and of the plugins (catalogues)
// check it.
package crusoenames

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
)

// Row is one name of the table.
type Row struct {
	Name      string // crusoe_vm_...
	RuleFile  string // the rule file that records it, relative to the module root
	Histogram bool   // recorded as Name_bucket, _sum and _count
	// PrefixPlugin and PrefixFamily: the plugin family that metric_prefix
	// crusoe_vm_ turns into Name; empty when none does.
	PrefixPlugin, PrefixFamily string
}

var (
	code   = regexp.MustCompile("`([^`]*)`")
	prefix = regexp.MustCompile("^`([a-z]+)`: `([a-z0-9_]+)`$")
)

// Load parses the table of the file at path (docs/crusoe-names.md).
func Load(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| #") {
			continue
		}
		// Cells are split on " | "; an escaped \| inside a cell is not one.
		cells := strings.Split(strings.ReplaceAll(strings.Trim(line, "| "), `\|`, "\x00"), " | ")
		if len(cells) != 6 {
			return nil, fmt.Errorf("%s:%d: %d cells, want 6", path, i+1, len(cells))
		}
		name, file := code.FindStringSubmatch(cells[1]), code.FindStringSubmatch(cells[3])
		if name == nil || file == nil || !strings.HasPrefix(name[1], "crusoe_vm_") {
			return nil, fmt.Errorf("%s:%d: no `crusoe_vm_...` name or rule file", path, i+1)
		}
		r := Row{Name: name[1], RuleFile: file[1], Histogram: strings.Contains(cells[4], " histogram (")}
		if m := prefix.FindStringSubmatch(cells[5]); m != nil {
			r.PrefixPlugin, r.PrefixFamily = m[1], m[2]
			if "crusoe_vm_"+r.PrefixFamily != r.Name {
				return nil, fmt.Errorf("%s:%d: metric_prefix crusoe_vm_ makes %s of %s, not %s", path, i+1, "crusoe_vm_"+r.PrefixFamily, r.PrefixFamily, r.Name)
			}
		} else if !strings.HasPrefix(cells[5], "—") {
			return nil, fmt.Errorf("%s:%d: last cell %q is neither `plugin`: `family` nor —", path, i+1, cells[5])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no table rows", path)
	}
	return rows, nil
}

// CheckPrefixFamilies fails t for every row of the table at path (the
// module's docs/crusoe-names.md) that says metric_prefix crusoe_vm_ gives
// plugin a family its catalogue does not have, and if no row names plugin.
func CheckPrefixFamilies(t testing.TB, path, plugin string, catalogue []*sdk.Desc) {
	t.Helper()
	rows, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
	}
	n := 0
	for _, r := range rows {
		if r.PrefixPlugin != plugin {
			continue
		}
		n++
		if !known[r.PrefixFamily] {
			t.Errorf("%s: %s from %s, which the plugin does not export", path, r.Name, r.PrefixFamily)
		}
	}
	if n == 0 {
		t.Errorf("%s names no family of this plugin", path)
	}
}

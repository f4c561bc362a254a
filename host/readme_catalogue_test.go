package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Markers around the catalogue table in a plugin's README.md.
const (
	catalogueBegin = "<!-- catalogue: begin -->"
	catalogueEnd   = "<!-- catalogue: end -->"
)

// TestPluginREADMEsShowTheirCatalogue: each shipped plugin's README holds
// its catalogue exactly as `plexporter metrics --markdown` prints it, so
// the README cannot drift from what the plugin declares (a family added,
// renamed, retyped or relabelled in metrics.go without its README fails
// here). -update rewrites the tables; review the diff.
func TestPluginREADMEsShowTheirCatalogue(t *testing.T) {
	dir := t.TempDir()
	mains, err := filepath.Glob("../plugins/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no shipped plugin found (%v)", err)
	}
	var names []string
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		names = append(names, name)
		if err := os.Symlink(filepath.Join(binDir, "shipped", "plexporter-"+name), filepath.Join(dir, "plexporter-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+dir, "--no-plugin.sandbox", "--log.level=error", "metrics", "--markdown")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metrics --markdown: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("metrics --markdown printed no table:\n%s", out)
	}
	header := lines[:2]
	rows := map[string][]string{}
	for _, l := range lines[2:] {
		plugin, _, _ := strings.Cut(strings.TrimPrefix(l, "| "), " |")
		rows[plugin] = append(rows[plugin], l)
	}
	update := false
	if f := flag.Lookup("update"); f != nil {
		update = f.Value.String() == "true"
	}
	for _, name := range names {
		if len(rows[name]) == 0 {
			t.Errorf("%s: no family in `plexporter metrics --markdown` (did the plugin start?)", name)
			continue
		}
		want := strings.Join(append(append([]string{catalogueBegin}, append(header, rows[name]...)...), catalogueEnd), "\n")
		path := filepath.Join("..", "plugins", name, "README.md")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		i, j := strings.Index(text, catalogueBegin), strings.Index(text, catalogueEnd)
		if i < 0 || j < i {
			t.Errorf("%s: no %s … %s block: add both lines to its Metrics section, then run this test with -update", path, catalogueBegin, catalogueEnd)
			continue
		}
		got := text[i : j+len(catalogueEnd)]
		if got == want {
			continue
		}
		if update {
			if err := os.WriteFile(path, []byte(text[:i]+want+text[j+len(catalogueEnd):]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: the catalogue table differs from `plexporter metrics --markdown` (the plugin's metrics.go is the truth unless it is wrong; rerun with -update and review the diff):\n%s", path, lineDiff(got, want))
	}
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !inb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ina[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

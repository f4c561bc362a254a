package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The fixture writer writes the files' series as node_exporter and the
// plugin parse them: files × series samples, 0644, only *.prom names left
// behind; a new version changes every file's content and mtime.
func TestWriteTextfiles(t *testing.T) {
	dir := t.TempDir()
	const files, series = 12, 30
	if err := writeTextfiles(dir, files, series, 0); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != files {
		t.Fatalf("%d entries, want %d files", len(ents), files)
	}
	first := map[string][]byte{}
	mtimes := map[string]time.Time{}
	seen := map[string]bool{}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".prom" {
			t.Errorf("%s left behind", e.Name())
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %04o, want 0644", e.Name(), fi.Mode().Perm())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		first[e.Name()], mtimes[e.Name()] = b, fi.ModTime()
		if !bytes.HasSuffix(b, []byte("\n")) {
			t.Errorf("%s does not end in a newline", e.Name())
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if len(mfs) != series/10 {
			t.Errorf("%s: %d families, want %d", e.Name(), len(mfs), series/10)
		}
		n := 0
		for name, mf := range mfs {
			if mf.GetHelp() == "" || mf.GetType().String() != "GAUGE" {
				t.Errorf("%s: %s: help %q, type %s", e.Name(), name, mf.GetHelp(), mf.GetType())
			}
			for _, m := range mf.GetMetric() {
				n++
				// No series twice, in one file or two.
				key := name + m.String()
				if seen[key] {
					t.Errorf("%s: series %s repeated", e.Name(), key)
				}
				seen[key] = true
			}
		}
		if n != series {
			t.Errorf("%s: %d series, want %d", e.Name(), n, series)
		}
	}
	if len(seen) != files*series {
		t.Fatalf("%d distinct series, want %d", len(seen), files*series)
	}

	time.Sleep(20 * time.Millisecond) // past the file system's timestamp granularity
	if err := writeTextfiles(dir, files, series, 1); err != nil {
		t.Fatal(err)
	}
	for name, b := range first {
		b2, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b, b2) || !fi.ModTime().After(mtimes[name]) {
			t.Errorf("%s: version 1 has the same content (%v) or no later mtime (%v, %v)", name, bytes.Equal(b, b2), mtimes[name], fi.ModTime())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != files {
		t.Errorf("%d entries after the rewrite, want %d", len(ents), files)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

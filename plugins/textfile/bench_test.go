package main

import (
	"context"
	"fmt"

	"path/filepath"
	"strings"
	"testing"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// benchDir writes files textfiles of series samples each (a family of
// ten series per job script, ten families per file).
func benchDir(b *testing.B, files, series int) string {
	b.Helper()
	dir := dirWith(b, nil)
	var sb strings.Builder
	for f := range files {
		sb.Reset()
		for s := range series {
			fam := s / 10
			if s%10 == 0 {
				fmt.Fprintf(&sb, "# HELP job_metric_%d A job script's metric.\n# TYPE job_metric_%d gauge\n", fam, fam)
			}
			fmt.Fprintf(&sb, "job_metric_%d{job=\"job-%d\",step=\"%d\"} %d.5\n", fam, f, s%10, f*series+s)
		}
		writeFile(b, filepath.Join(dir, fmt.Sprintf("job-%04d.prom", f)), sb.String(), fixedMtime)
	}
	return dir
}

func configured(b *testing.B, dir string) *plugin {
	b.Helper()
	p := testPlugin()
	if err := sdktest.Configure(b, p, map[string]any{"directories": []any{dir}, "max_series": 200000, "max_series_per_file": 1000}, sdk.Paths{}); err != nil {
		b.Fatal(err)
	}
	return p
}

func collectOnce(b *testing.B, p *plugin) int {
	n := 0
	w := sdktest.NewWriter(nil, "", func(r *pluginv1.CollectResponse) error {
		for _, c := range r.GetBatch().GetFamilies() {
			n += len(c.GetValues())
		}
		if len(r.GetErrors()) > 0 {
			return fmt.Errorf("errors: %v", r.GetErrors())
		}
		return nil
	})
	if err := p.Collect(context.Background(), w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkCollect: 1,000 files of 100 series. Cold parses every file (a
// new plugin, as after a restart, or every file rewritten); Unchanged is
// the usual scrape, which only lists and stats the files.
func BenchmarkCollect(b *testing.B) {
	dir := benchDir(b, 1000, 100)
	b.Run("Cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := configured(b, dir)
			if n := collectOnce(b, p); n < 100000 {
				b.Fatalf("%d samples", n)
			}
		}
	})
	b.Run("Unchanged", func(b *testing.B) {
		p := configured(b, dir)
		collectOnce(b, p)
		b.ReportAllocs()
		for b.Loop() {
			if n := collectOnce(b, p); n < 100000 {
				b.Fatalf("%d samples", n)
			}
		}
		if p.parses != 1000 {
			b.Fatalf("%v parses, want 1000 (the first scrape's)", p.parses)
		}
	})

}

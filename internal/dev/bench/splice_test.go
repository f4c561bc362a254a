package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReportKeepsTheHandWrittenSections(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "performance.md")
	doc := "# title\n\n## Hand, before\n\nkept 1\n\n" + reportBegin + "\n\nold report\n\n" + reportEnd + "\n\n## Hand, after\n\nkept 2\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second run replaces the first's report, no more
		if err := writeReport(path, "## Machine\n\nnew report\n"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(path)
	want := "# title\n\n## Hand, before\n\nkept 1\n\n" + reportBegin + "\n\n## Machine\n\nnew report\n\n" + reportEnd + "\n\n## Hand, after\n\nkept 2\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWriteReportRefusesAFileWithoutMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	const hand = "# title\n\nhand-written only\n"
	os.WriteFile(path, []byte(hand), 0o644)
	err := writeReport(path, "report\n")
	if err == nil || !strings.Contains(err.Error(), "no hand-written section is lost") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(path); string(got) != hand {
		t.Fatalf("the file changed: %q", got)
	}
	// The end marker before the begin marker is no pair either.
	os.WriteFile(path, []byte(reportEnd+"\n"+reportBegin+"\n"), 0o644)
	if err := writeReport(path, "report\n"); err == nil {
		t.Fatal("markers out of order: no error")
	}
}

func TestWriteReportMakesANewFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	if err := writeReport(path, "report\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !hasMarkers(string(got)) || !strings.Contains(string(got), "\n\nreport\n\n") {
		t.Fatalf("new file: %q", got)
	}
}

// The repository's own file has its markers, so make bench keeps its
// hand-written sections.
func TestPerformanceDocHasMarkers(t *testing.T) {
	b, err := os.ReadFile("../../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	if !hasMarkers(string(b)) {
		t.Fatal("docs/performance.md lost its make bench markers: a run would refuse to write it")
	}
}

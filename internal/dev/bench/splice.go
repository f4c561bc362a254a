package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The harness's report goes between these markers of -out; the rest of
// that file (docs/performance.md) is written by hand — measurements of
// one change, with their dates and builds — and a run must keep it.
const (
	reportBegin = "<!-- make bench: begin. Between these two markers the harness writes its report; every other section of this file is written by hand and kept. -->"
	reportEnd   = "<!-- make bench: end -->"
)

// writeReport puts report between the markers of the file at path, or
// makes the file (a title, then the report between markers) where there
// is none. A file without both markers, in order, is an error, never
// overwritten.
func writeReport(path, report string) error {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return os.WriteFile(path, []byte(splice("# plexporter performance\n\n"+reportBegin+"\n"+reportEnd+"\n", report)), 0o644)
	}
	if err != nil {
		return err
	}
	if !hasMarkers(string(old)) {
		return fmt.Errorf("%s has no %q … %q markers: the report is not written, so that no hand-written section is lost (add the two markers where the report goes, or give another -out)", path, reportBegin[:24], reportEnd)
	}
	return os.WriteFile(path, []byte(splice(string(old), report)), 0o644)
}

func hasMarkers(doc string) bool {
	b := strings.Index(doc, reportBegin)
	return b >= 0 && strings.Index(doc[b:], reportEnd) > 0
}

// splice replaces what is between the markers of doc (which has them)
// with report.
func splice(doc, report string) string {
	b := strings.Index(doc, reportBegin) + len(reportBegin)
	e := b + strings.Index(doc[b:], reportEnd)
	return doc[:b] + "\n\n" + strings.TrimRight(report, "\n") + "\n\n" + doc[e:]
}

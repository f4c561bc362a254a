package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/sdk"
)

// fileKey is what tells a changed file from an unchanged one without
// reading it: a writer that renames a new file into place or rewrites one
// changes its size or its mtime.
type fileKey struct {
	size  int64
	mtime time.Time
}

// parsed is one version of a file, parsed and checked.
type parsed struct {
	key      fileKey
	families []*family // by name
	// refused are the series of the file left out at parse time, by
	// reason, with what to report.
	refused []refusal
}

// refusal is a part of a file left out, reported at every scrape that
// serves the file.
type refusal struct {
	reason string // a seriesRefused* reason
	series int
	err    error
}

// family is one metric family of one file.
type family struct {
	name    string
	typ     sdk.Type
	help    string // "" without a HELP line (or an empty one)
	labels  []string
	metrics []*dto.Metric // label pairs sorted by name; duplicates removed
	keys    []string      // each metric's label pairs, for duplicates across files
	series  int           // exposition lines: 1 per value, buckets or quantiles + 2
}

// refuseError is a file left out as a whole, with its reason.
type refuseError struct {
	reason string
	err    error
}

func (e *refuseError) Error() string { return e.err.Error() }

func refuse(reason, format string, args ...any) error {
	return &refuseError{reason: reason, err: fmt.Errorf(format, args...)}
}

// incompleteError is a file that may be being written: it is held.
type incompleteError struct{ err error }

func (e *incompleteError) Error() string { return e.err.Error() }

// worldWritable is the permission no textfile or directory may have: a
// file anyone may write publishes anyone's numbers as the node's.
const worldWritable = 0o002

// unsafeDirectory says how to set up a directory that many users write.
func unsafeDirectory(dir string, mode fs.FileMode) error {
	return fmt.Errorf("directory %s is writable by every user (mode %04o): anyone could publish or replace metrics; none of its files is read. "+
		"Give the writers a group instead: chgrp <writers> %s && chmod 2775 %s (group-writable, setgid so new files get the group, not writable by others)",
		dir, mode.Perm(), dir, dir)
}

// checkDirectory returns the directory's real path, or why none of its
// files is read.
func checkDirectory(dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&worldWritable != 0 {
		return "", unsafeDirectory(dir, fi.Mode())
	}
	return filepath.EvalSymlinks(dir)
}

// statFile returns the file's metadata after the safety checks: a
// symlink is followed only to a file in the same directory (real is the
// directory's real path), the file must be regular, not writable by
// others and within the size cap.
func statFile(path, real string, maxBytes int64) (string, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", nil, err
	}
	target := path
	if fi.Mode()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", nil, refuse(fileRefusedSymlink, "%s: symlink: %v", path, err)
		}
		if filepath.Dir(resolved) != real {
			return "", nil, refuse(fileRefusedSymlink, "%s: symlink to %s, outside the directory; links are followed only to files beside them", path, resolved)
		}
		if fi, err = os.Lstat(resolved); err != nil {
			return "", nil, err
		}
		target = resolved
	}
	if err := checkFile(path, fi, maxBytes); err != nil {
		return "", nil, err
	}
	return target, fi, nil
}

func checkFile(path string, fi fs.FileInfo, maxBytes int64) error {
	if !fi.Mode().IsRegular() {
		return refuse(fileRefusedNotRegular, "%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Mode().Perm()&worldWritable != 0 {
		return refuse(fileRefusedPermissions, "%s: writable by every user (mode %04o), refused: anyone could publish metrics through it; chmod o-w it, or have its writer create it with umask 022 or 002", path, fi.Mode().Perm())
	}
	if fi.Size() > maxBytes {
		return refuse(fileRefusedSize, "%s: %d bytes, more than max_file_bytes (%d)", path, fi.Size(), maxBytes)
	}
	return nil
}

// readFile reads target (a file statFile accepted) without following a
// link put in its place since, and without blocking on a FIFO, and checks
// it again on the open descriptor.
func readFile(path, target string, maxBytes int64) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if err := checkFile(path, fi, maxBytes); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, nil, refuse(fileRefusedSize, "%s: more than max_file_bytes (%d) while read", path, maxBytes)
	}
	return data, fi, nil
}

// openMetricsEOF ends an OpenMetrics exposition; a file that ends with it
// is parsed as OpenMetrics, any other as the text format.
const openMetricsEOF = "# EOF"

// parse parses one file's content. A file that does not end in a newline
// (or "# EOF") is incomplete: its writer may not be done.
func parse(path string, data []byte, maxSeries int) (*parsed, error) {
	trimmed := bytes.TrimRight(data, "\n")
	openMetrics := bytes.HasSuffix(trimmed, []byte("\n"+openMetricsEOF)) || string(trimmed) == openMetricsEOF
	if len(data) > 0 && data[len(data)-1] != '\n' && !openMetrics {
		return nil, &incompleteError{fmt.Errorf("%s: no newline at the end: the file is incomplete (write it elsewhere and rename it into place)", path)}
	}
	var mfs []*dto.MetricFamily
	if openMetrics {
		dec := expfmt.NewDecoder(bytes.NewReader(data), expfmt.NewFormat(expfmt.TypeOpenMetrics))
		for {
			mf := &dto.MetricFamily{}
			err := dec.Decode(mf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, &incompleteError{fmt.Errorf("%s: OpenMetrics: %w", path, err)}
			}
			mfs = append(mfs, mf)
		}
	} else {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		byName, err := parser.TextToMetricFamilies(bytes.NewReader(data))
		if err != nil {
			return nil, &incompleteError{fmt.Errorf("%s: %w", path, err)}
		}
		for _, mf := range byName {
			mfs = append(mfs, mf)
		}
	}
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.TimestampMs != nil {
				return nil, refuse(fileRefusedTimestamp, "%s: %s has a timestamp; textfiles must not carry timestamps (node_exporter refuses them too), the file is skipped", path, mf.GetName())
			}
		}
	}
	p := &parsed{}
	series := 0
	for _, mf := range mfs {
		f, r := newFamily(path, mf)
		if r != nil {
			p.refused = append(p.refused, *r)
		}
		if f == nil {
			continue
		}
		if series+f.series > maxSeries {
			p.refused = append(p.refused, refusal{seriesRefusedFileLimit, f.series,
				fmt.Errorf("%s: family %s (%d series) is past max_series_per_file (%d), refused", path, f.name, f.series, maxSeries)})
			continue
		}
		series += f.series
		p.families = append(p.families, f)
	}
	return p, nil
}

var dtoTypes = map[dto.MetricType]sdk.Type{
	dto.MetricType_COUNTER:   sdk.Counter,
	dto.MetricType_GAUGE:     sdk.Gauge,
	dto.MetricType_UNTYPED:   sdk.Untyped,
	dto.MetricType_HISTOGRAM: sdk.Histogram,
	dto.MetricType_SUMMARY:   sdk.Summary,
}

// newFamily converts a parsed family; series repeated within the file
// are dropped after the first and reported.
func newFamily(path string, mf *dto.MetricFamily) (*family, *refusal) {
	typ, ok := dtoTypes[mf.GetType()]
	if !ok {
		return nil, &refusal{seriesRefusedUnsupported, len(mf.GetMetric()),
			fmt.Errorf("%s: family %s: type %s has no place in the exposition the host serves, refused", path, mf.GetName(), strings.ToLower(mf.GetType().String()))}
	}
	f := &family{name: mf.GetName(), typ: typ, help: mf.GetHelp()}
	seen := make(map[string]bool, len(mf.GetMetric()))
	dups := 0
	var key strings.Builder
	for _, m := range mf.GetMetric() {
		slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
		key.Reset()
		for _, l := range m.Label {
			if l.GetValue() == "" {
				continue // an empty label is no label: {a=""} is {}
			}
			key.WriteString(l.GetName())
			key.WriteByte(0)
			key.WriteString(l.GetValue())
			key.WriteByte(0)
			if !slices.Contains(f.labels, l.GetName()) {
				f.labels = append(f.labels, l.GetName())
			}
		}
		k := key.String()
		if seen[k] {
			dups++
			continue
		}
		seen[k] = true
		f.metrics = append(f.metrics, m)
		f.keys = append(f.keys, k)
		f.series += seriesOf(typ, m)
	}
	slices.Sort(f.labels)
	if dups > 0 {
		return f, &refusal{seriesRefusedDuplicate, dups, fmt.Errorf("%s: family %s: %d series repeated in the file, the first of each kept", path, f.name, dups)}
	}
	return f, nil
}

// seriesOf counts the exposition lines of one metric, as the host's cap
// counts series.
func seriesOf(typ sdk.Type, m *dto.Metric) int {
	switch typ {
	case sdk.Histogram:
		n := len(m.GetHistogram().GetBucket()) + 2
		if !hasInf(m.GetHistogram().GetBucket()) {
			n++
		}
		return n
	case sdk.Summary:
		return len(m.GetSummary().GetQuantile()) + 2
	}
	return 1
}

func hasInf(bs []*dto.Bucket) bool {
	return len(bs) > 0 && math.IsInf(bs[len(bs)-1].GetUpperBound(), 1)
}

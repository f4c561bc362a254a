package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// maxMappingFile is the largest job-mapping file read: maxJobIDsPerFile
// job ids of a few bytes each, with room to spare. A larger file is not a
// mapping file and is refused with an error naming it.
const maxMappingFile = 64 << 10

// jobID matches a Slurm job id as prolog scripts write it: a number, an
// array task (1234_7) or a heterogeneous component (1234+1). Anything
// else in a mapping file is an error naming the file and line, never a
// label value.
var jobID = regexp.MustCompile(`^[0-9]+([_+][0-9]+)?$`)

// deviceJob is one line of a mapping file: the device is the file's name.
type deviceJob struct{ Device, JobID string }

// readJobMapping reads the job-mapping directory GPU exporters use
// (dcgm-exporter's --hpc-job-mapping-dir): one file per device, named
// after it, holding one job id per line, written by Slurm's prolog and
// emptied or removed by its epilog.
//
// A file being rewritten while it is read must never give a half-written
// job id, so each file is read whole and only newline-terminated lines
// count: a last line without its newline may be the first bytes of an
// id still being written and is skipped (`echo $SLURM_JOB_ID >> file`
// writes the newline; a script using printf must add it). Names starting
// with a dot are skipped, so a script may write .<device>.tmp and rename
// it into place, which readers see atomically. A missing directory is no
// jobs (the epilog may remove it); every other failure is returned with
// the jobs still read.
func readJobMapping(dir string) ([]deviceJob, []error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("job-mapping directory: %w", err)}
	}
	var jobs []deviceJob
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		ids, err := readMappingFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range ids {
			jobs = append(jobs, deviceJob{Device: name, JobID: id})
		}
	}
	return jobs, errs
}

// readMappingFile returns the job ids of one file, each once, in file
// order. A file removed between listing and reading is no jobs.
func readMappingFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMappingFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxMappingFile {
		return nil, fmt.Errorf("%s: larger than %d bytes, not a job-mapping file", path, maxMappingFile)
	}
	var ids []string
	seen := map[string]bool{}
	for n := 1; ; n++ {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		if !complete {
			break // no newline yet: possibly a job id still being written
		}
		data = rest
		id := strings.TrimSpace(string(line))
		if id == "" || seen[id] {
			continue
		}
		if !jobID.MatchString(id) {
			return ids, fmt.Errorf("%s:%d: %.64q is not a Slurm job id", path, n, id)
		}
		if len(ids) == maxJobIDsPerFile {
			return ids, fmt.Errorf("%s: more than %d job ids, the rest ignored", path, maxJobIDsPerFile)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// maxFDsPerProcess bounds the fd links read of one process in one scan;
// an MPI rank holds a few hundred. The rest are not read, counted in
// attribution_limit_reached_total{limit="fds_per_process"}.
const maxFDsPerProcess = 16384

// maxCgroupFile is the most of /proc/<pid>/cgroup read: one line per
// cgroup v1 hierarchy, each a path of at most PATH_MAX.
const maxCgroupFile = 64 << 10

// procfsReader is the part of procfs a scan reads, a variable so that
// tests can make a process vanish or refuse between two reads; the
// plugin uses osProcfs.
type procfsReader interface {
	ReadFile(path string, max int) ([]byte, error)
	ReadDirNames(dir string, max int) ([]string, error)
	Readlink(path string) (string, error)
}

type osProcfs struct{}

func (osProcfs) ReadFile(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(max)))
}

func (osProcfs) ReadDirNames(dir string, max int) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(max)
	if err == io.EOF {
		err = nil // an empty directory
	}
	return names, err
}

func (osProcfs) Readlink(path string) (string, error) { return os.Readlink(path) }

// gone tells whether err means the process (or its fd) went away during
// the scan: not a failure, the process is simply not there any more.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// deviceJobUse is one device held open by a process of a Slurm job.
type deviceJobUse struct {
	Kind, Device, JobID string
}

// procScan is the outcome of one scan of procfs.
type procScan struct {
	Uses []deviceJobUse // in the order found, each once

	PidsCapped    bool // more processes than max_pids: the rest were not read
	FDsCapped     int  // job processes with more fds than maxFDsPerProcess
	Unreadable    int  // job processes whose fd directory or links could not be read
	UnreadableErr error
	// CgroupUnreadable counts the processes whose cgroup file could not be
	// read (not gone): whether they are in a job is not known.
	CgroupUnreadable int
	CgroupErr        error
	JobProcesses     int // processes found in a job's cgroup
	ProcessesRead    int // /proc/<pid>/cgroup files read
}

// scanDeviceJobs finds the devices that processes of Slurm jobs hold open.
// A process's cgroup file is read first (any user may read it, and few
// processes are in a job): only the processes in a job's cgroup have
// their /proc/<pid>/fd read, which needs ptrace-read access to them (the
// scanner's user, or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH for other
// users' processes, and no Landlock domain; README.md, What it needs).
//
// At most maxPids processes are looked at, the lowest pids.
// Processes and fds that vanish between two reads are skipped; fd
// directories that cannot be read are counted, with the first error.
func scanDeviceJobs(pfs procfsReader, procfs string, files *deviceFiles, maxPids int) (procScan, error) {
	var s procScan
	names, err := pfs.ReadDirNames(procfs, -1)
	if err != nil {
		return s, fmt.Errorf("list processes: %w", err)
	}
	// By pid, as the kernel lists them, so that a cap keeps the same
	// processes scrape after scrape.
	var pids []int
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil && pid > 0 {
			pids = append(pids, pid) // not self, net, meminfo, …
		}
	}
	slices.Sort(pids)
	seen := map[deviceJobUse]bool{}
	for _, pid := range pids {
		name := strconv.Itoa(pid)
		if s.ProcessesRead == maxPids {
			s.PidsCapped = true
			break
		}
		s.ProcessesRead++
		dir := filepath.Join(procfs, name)
		o, err := readOwner(pfs, dir)
		if err != nil && !gone(err) {
			// hidepid, or a sandbox without {procfs}: which job the
			// process is in cannot be told.
			s.CgroupUnreadable++
			if s.CgroupErr == nil {
				s.CgroupErr = err
			}
		}
		if err != nil || o.JobID == "" {
			continue
		}
		s.JobProcesses++
		targets, capped, err := fdTargets(pfs, dir)
		if capped {
			s.FDsCapped++
		}
		if err != nil {
			s.Unreadable++
			if s.UnreadableErr == nil {
				s.UnreadableErr = err
			}
		}
		for _, t := range targets {
			for _, d := range files.resolve(t) {
				u := deviceJobUse{Kind: d.Kind, Device: d.Name, JobID: o.JobID}
				if !seen[u] {
					seen[u] = true
					s.Uses = append(s.Uses, u)
				}
			}
		}
	}
	return s, nil
}

// readOwner reads the owner of the process whose procfs directory is dir.
func readOwner(pfs procfsReader, dir string) (owner, error) {
	data, err := pfs.ReadFile(filepath.Join(dir, "cgroup"), maxCgroupFile)
	if err != nil {
		return owner{}, err
	}
	return parseCgroup(data), nil
}

// fdTargets returns the targets of the process's fd links that may be
// device files the plugins report on. A process that exits mid-scan is
// no targets and no error; one whose fds cannot be read is an error
// naming its directory, with the targets read before it.
func fdTargets(pfs procfsReader, dir string) (targets []string, capped bool, err error) {
	fdDir := filepath.Join(dir, "fd")
	fds, err := pfs.ReadDirNames(fdDir, maxFDsPerProcess+1)
	if gone(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", fdDir, err)
	}
	if len(fds) > maxFDsPerProcess {
		fds, capped = fds[:maxFDsPerProcess], true
	}
	for _, fd := range fds {
		t, err := pfs.Readlink(filepath.Join(fdDir, fd))
		if gone(err) {
			continue // closed since the directory was read
		}
		if err != nil {
			return targets, capped, fmt.Errorf("read %s: %w", filepath.Join(fdDir, fd), err)
		}
		// Sockets, pipes and anonymous inodes are "socket:[…]" and the
		// like; only paths can be device files.
		if strings.HasPrefix(t, "/dev/") {
			targets = append(targets, t)
		}
	}
	return targets, capped, nil
}

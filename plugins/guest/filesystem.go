package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
)

// errUnsupported is what the statfs twin returns off Linux.
var errUnsupported = errors.New("statfs is only supported on Linux")

// fsUsage is what statfs(2) says about a filesystem, block counts in units
// of blockSize.
type fsUsage struct {
	blocks, free, avail, blockSize uint64
	files, filesFree               uint64
}

// statfsFunc reads a filesystem's usage; statfs on Linux, a fake in tests.
type statfsFunc func(path string) (fsUsage, error)

// mount is a filesystem whose usage the plugin reads.
type mount struct {
	device, mountPoint, fstype string
	path                       string // mountPoint under the host's root filesystem
}

// mountsFunc reads the mount table of process pid: <procfs>/<pid>/mountinfo,
// <procfs>/self/mountinfo for pid 0; the demo build replays a capture.
type mountsFunc func(pfs procfs.FS, pid int) ([]*procfs.MountInfo, error)

func readMountinfo(pfs procfs.FS, pid int) ([]*procfs.MountInfo, error) {
	if pid > 0 {
		return pfs.GetProcMounts(pid)
	}
	return pfs.GetMounts()
}

// selectMounts returns the mounts of the wanted types that exclude does not
// match, the first mount point of each filesystem only: a bind mount or a
// second mount of the same NFS export shares the superblock (st_dev), so
// statfs would repeat the same numbers under another name.
func selectMounts(infos []*procfs.MountInfo, rootfs string, types []string, exclude *regexp.Regexp) []mount {
	seen := map[string]bool{}
	var out []mount
	for _, mi := range infos {
		if !slices.Contains(types, mi.FSType) {
			continue
		}
		mp := unescapeMountinfo(mi.MountPoint)
		if exclude.MatchString(mp) || seen[mi.MajorMinorVer] {
			continue
		}
		seen[mi.MajorMinorVer] = true
		out = append(out, mount{
			device:     strings.TrimPrefix(unescapeMountinfo(mi.Source), "/dev/"),
			mountPoint: mp,
			fstype:     mi.FSType,
			path:       filepath.Join(rootfs, mp),
		})
	}
	return out
}

// unescapeMountinfo undoes the kernel's octal escapes of space, tab,
// newline and backslash in mountinfo fields (\040 for a space), which
// procfs leaves in place.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// statfsRunner runs the statfs calls of a scrape so that none can block it:
// each call runs in its own goroutine and the scrape waits for them only
// until its deadline. A call that has not returned by then (a hung NFS
// server: statfs is a round trip to it, and a hard mount retries forever)
// cannot be cancelled, so the runner remembers it and starts no second call
// on that filesystem until it returns. A hung mount therefore costs one
// goroutine (and the thread blocked in the syscall) however many scrapes
// pass, never one per scrape.
type statfsRunner struct {
	statfs statfsFunc
	now    func() time.Time

	mu       sync.Mutex
	inflight map[string]time.Time // path -> start of the call that has not returned
}

func newStatfsRunner(statfs statfsFunc, now func() time.Time) *statfsRunner {
	return &statfsRunner{statfs: statfs, now: now, inflight: map[string]time.Time{}}
}

// statfsOutcome is one mount's result in a scrape: its usage, or why there
// is none.
type statfsOutcome struct {
	usage fsUsage
	err   error
}

// errStatfsTimeout marks a call that did not return before the deadline.
var errStatfsTimeout = errors.New("no answer before the deadline; skipped (a hung NFS server?)")

// run statfs's every mount concurrently and returns when all have answered
// or at deadline, whichever is first. outcomes[i] belongs to mounts[i].
func (r *statfsRunner) run(mounts []mount, deadline time.Time) []statfsOutcome {
	out := make([]statfsOutcome, len(mounts))
	type answer struct {
		i int
		statfsOutcome
	}
	// Buffered for every call, so a call that returns after run has given
	// up never blocks: its goroutine ends and the answer is dropped.
	answers := make(chan answer, len(mounts))
	waiting := map[int]bool{}
	for i, m := range mounts {
		r.mu.Lock()
		since, busy := r.inflight[m.path]
		if !busy {
			r.inflight[m.path] = r.now()
		}
		r.mu.Unlock()
		if busy {
			out[i].err = fmt.Errorf("statfs %s: the call started %s ago has not returned; skipped", m.path, r.now().Sub(since).Round(time.Second))
			continue
		}
		waiting[i] = true
		go func() {
			u, err := r.statfs(m.path)
			r.mu.Lock()
			delete(r.inflight, m.path)
			r.mu.Unlock()
			answers <- answer{i, statfsOutcome{u, err}}
		}()
	}
	if len(waiting) == 0 {
		return out
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for len(waiting) > 0 {
		select {
		case a := <-answers:
			out[a.i] = a.statfsOutcome
			delete(waiting, a.i)
		case <-timer.C:
			for i := range waiting {
				out[i].err = fmt.Errorf("statfs %s: %w", mounts[i].path, errStatfsTimeout)
			}
			return out
		}
	}
	return out
}

// writeFilesystems writes the usage of the mounts that answered and counts
// each that did not.
func writeFilesystems(w *sdk.Writer, mounts []mount, outcomes []statfsOutcome, fail failFunc) {
	for i, m := range mounts {
		o := outcomes[i]
		if o.err != nil {
			fail(collectorFilesystem, o.err)
			continue
		}
		u := o.usage
		lv := []string{m.device, m.mountPoint, m.fstype}
		w.Gauge(descFSSize, float64(u.blocks)*float64(u.blockSize), lv...)
		w.Gauge(descFSUsed, float64(u.blocks-min(u.free, u.blocks))*float64(u.blockSize), lv...)
		w.Gauge(descFSAvailable, float64(u.avail)*float64(u.blockSize), lv...)
		w.Gauge(descFSInodes, float64(u.files), lv...)
		w.Gauge(descFSInodesUsed, float64(u.files-min(u.filesFree, u.files)), lv...)
	}
}

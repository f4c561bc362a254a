package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Dir is a sysfs directory held open between collects, together with the
// attributes read through it and its subdirectories. A collector that reads
// the same few thousand attributes on every scrape opens each one once and
// re-reads it with pread at offset 0, which makes sysfs call the
// attribute's show() again (kernfs restarts its seq_file at offset 0), so
// the value is as fresh as after an open. What that saves is the open and
// close of every file: the path walk through the class symlinks, and under
// the plugin sandbox the Landlock check of every path component up to the
// root — 60% of the rdma plugin's sandboxed collect (docs/performance.md,
// scenario 2).
//
// What the directory holds follows the directory: Refresh re-lists it
// (getdents from offset 0 on the held descriptor) and closes every held
// file and subdirectory whose name is gone or now names another inode (a
// device removed and re-added, a counter file replaced); a name that
// appears is opened on its first read. Reads of a name the last listing
// does not have fail with fs.ErrNotExist, as an open would have. So a
// caller that refreshes a directory before reading it sees exactly what
// open-per-read showed, minus the opens.
//
// A Dir is not safe for concurrent use; Dirs of different devices are.
type Dir struct {
	path    string // the path it was opened by: errors name it, as a path-based read would
	fd      int
	fds     *FDBudget
	gen     uint64
	entries map[string]*entry
	names   []string // the last listing, in name order

	// What RefreshIfChanged compares: the directory's stat before the last
	// listing, and whether that stat could hide a change (below).
	stamp  dirStamp
	listed bool // stamp belongs to a listing that succeeded
	racy   bool // the stamp's times were too recent to trust

	listings uint64 // how many times the directory was listed (Listings)
}

// dirStamp is what a directory's stat says about its set of names: on a
// disk or tmpfs filesystem, creating, removing or renaming an entry sets
// the directory's mtime and ctime (and its size, and its link count for a
// subdirectory); on sysfs (kernfs) only the link count follows the
// subdirectories, and the names of a kernfs directory that are not
// subdirectories are made and removed with the kobject that owns it (see
// RefreshIfChanged).
type dirStamp struct {
	nlink, size  uint64
	mtime, ctime int64 // ns since the epoch
}

// RacyWindow is how recent a directory's mtime or ctime may be at a
// listing and still be trusted: a filesystem stamps changes with a clock
// that can be as coarse as a jiffy (and 2 s on FAT), so a change made in
// the same tick as the listing, after it, would leave the stamp as it was.
// A directory changed within the window is listed again on the next
// refresh, as git re-checks a file whose mtime is as new as its index.
// (A tree written just before it is read, as a benchmark's, is re-listed
// on every read for this long.)
const RacyWindow = 2 * time.Second

var racyWindow = RacyWindow // a variable for the tests of the stamp itself

// entry is one name of the last listing.
type entry struct {
	ino  uint64 // d_ino: changes when the name is removed and created again
	typ  uint8  // d_type
	gen  uint64 // the listing that last saw it
	fd   int    // held attribute descriptor, -1 if none
	kept bool   // fd counts against the budget
	sub  *Dir   // held subdirectory, nil if none
}

// FDBudget bounds how many descriptors Dirs keep open, so that a tree larger
// than the process's RLIMIT_NOFILE degrades to open-per-read for the files
// beyond the budget instead of failing (or starving the process's sockets).
type FDBudget struct {
	max  int64
	used atomic.Int64
}

// fdReserve is what NewFDBudget leaves to the rest of the process: the
// plugin's gRPC and netlink sockets, the runtime's descriptors, and the
// transient opens of files beyond the budget.
const fdReserve = 64

// maxHeldFDs caps the budget where RLIMIT_NOFILE is effectively unlimited
// (the Go runtime raises the soft limit to the hard one): a held sysfs
// attribute costs the kernel about a page (its seq_file buffer).
const maxHeldFDs = 1 << 15

// NewFDBudget returns a budget of the process's RLIMIT_NOFILE less a
// reserve for everything else it opens (at most 32768 descriptors).
func NewFDBudget() *FDBudget {
	return &FDBudget{max: min(int64(nofileLimit())-fdReserve, maxHeldFDs)}
}

// NewFDBudgetOf returns a budget of n descriptors (tests, and callers that
// share one process with other descriptor users).
func NewFDBudgetOf(n int) *FDBudget { return &FDBudget{max: int64(n)} }

// Held is how many descriptors the budget's Dirs hold now.
func (b *FDBudget) Held() int { return int(b.used.Load()) }

func (b *FDBudget) take() bool {
	if b.used.Add(1) > b.max {
		b.used.Add(-1)
		return false
	}
	return true
}

func (b *FDBudget) give() { b.used.Add(-1) }

// Path is the path the directory was opened by.
func (d *Dir) Path() string { return d.path }

// Listings is how many times the directory has been listed since it was
// opened: what RefreshIfChanged saves shows in it.
func (d *Dir) Listings() uint64 { return d.listings }

// Names is the last listing (Refresh) in name order. The slice is shared
// and never modified: a listing that changes the names makes a new one,
// so a caller may keep it past the next Refresh.
func (d *Dir) Names() []string { return d.names }

// Has reports whether the last listing has name (a lookup that, unlike a
// failed Sub or Read, makes no error).
func (d *Dir) Has(name string) bool { return d.entries[name] != nil }

// Numbered is Numbered's selection over the last listing: the names that
// are prefix followed by a canonical decimal number, in numeric order.
func (d *Dir) Numbered(prefix string) []Entry { return numbered(d.names, prefix) }

// Sub returns the held subdirectory name of the last listing, opening it
// on first use (relative to d, so the path is not walked again). A name
// that is not in the listing is fs.ErrNotExist. The subdirectory is not
// refreshed: call Refresh on it before reading it.
func (d *Dir) Sub(name string) (*Dir, error) {
	e := d.entries[name]
	if e == nil {
		return nil, d.notExist(name)
	}
	if e.sub == nil {
		sub, err := d.openSub(name)
		if err != nil {
			return nil, err
		}
		e.sub = sub
	}
	return e.sub, nil
}

// ReadAttr reads the attribute name of the last listing as a label value
// (see Clean).
func (d *Dir) ReadAttr(name string, buf *Buffer) (string, error) {
	b, err := d.Read(name, buf)
	if err != nil {
		return "", err
	}
	return Clean(b), nil
}

// ReadCounter reads the attribute name of the last listing and parses it
// with ParseCounter; errors name the path.
func (d *Dir) ReadCounter(name string, buf *Buffer) (uint64, error) {
	b, err := d.Read(name, buf)
	if err != nil {
		return 0, err
	}
	v, err := ParseCounter(b)
	if err != nil && !errors.Is(err, ErrNotAvailable) {
		return 0, fmt.Errorf("%s: %w", filepath.Join(d.path, name), err)
	}
	return v, err
}

// Close closes the directory and everything held through it.
func (d *Dir) Close() {
	for name, e := range d.entries {
		d.drop(e)
		delete(d.entries, name)
	}
	d.names = nil
	d.closeSelf()
}

// drop closes what an entry holds.
func (d *Dir) drop(e *entry) {
	if e.sub != nil {
		e.sub.Close()
		e.sub = nil
	}
	if e.fd >= 0 {
		closeFD(e.fd)
		if e.kept {
			d.fds.give()
		}
		e.fd, e.kept = -1, false
	}
}

// see records one name of a listing: a new name gets an entry, a name
// whose inode changed loses what it held.
func (d *Dir) see(name []byte, ino uint64, typ uint8) (added bool) {
	e := d.entries[string(name)] // no allocation for the lookup
	if e == nil {
		d.entries[string(name)] = &entry{ino: ino, typ: typ, gen: d.gen, fd: -1}
		return true
	}
	if e.ino != ino || e.typ != typ {
		d.drop(e)
		e.ino, e.typ = ino, typ
	}
	e.gen = d.gen
	return false
}

// sweep forgets the names the listing of generation d.gen did not see and
// rebuilds the sorted name list when the set of names changed.
func (d *Dir) sweep(changed bool) {
	for name, e := range d.entries {
		if e.gen != d.gen {
			d.drop(e)
			delete(d.entries, name)
			changed = true
		}
	}
	if !changed {
		return
	}
	d.names = make([]string, 0, len(d.entries)) // never the old array: callers may hold it (Names)
	for name := range d.entries {
		d.names = append(d.names, name)
	}
	slices.Sort(d.names)
}

func (d *Dir) notExist(name string) error {
	return &fs.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: fs.ErrNotExist}
}

// numbered selects and orders the numbered names (see Numbered).
func numbered(names []string, prefix string) []Entry {
	var out []Entry
	for _, name := range names {
		digits, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(digits); err == nil && n >= 0 && strconv.Itoa(n) == digits {
			out = append(out, Entry{Name: name, Num: n})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Num - b.Num })
	return out
}

// keepListing undoes a Refresh that failed part way: every name it has
// stays, none is swept.
func (d *Dir) keepListing() {
	for _, e := range d.entries {
		e.gen = d.gen
	}
	d.sweep(true)
}

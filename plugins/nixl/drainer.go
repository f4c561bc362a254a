package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// drainer owns the telemetry directories: it finds ring files, keeps one
// reader per file, drains every ring on its own timer (an undrained ring
// silently drops new events once full) and expires the agents of dead
// processes. Every access to a mapping happens on its one goroutine, so
// the per-goroutine fault guard (reader_linux.go) covers it; scrapes only
// read the sums under mu.
//
// Directories are re-listed every rescan_interval rather than watched with
// inotify: a listing of a directory of a few dozen files costs
// microseconds (see README.md for the measurement), it needs no extra
// descriptor or Landlock right, and it also notices files that inotify
// would report on a directory the plugin could not watch yet (created after
// the plugin started). A new agent is therefore drained at most
// rescan_interval after its file appears; its first events wait in its
// ring meanwhile, so none is lost.
type drainer struct {
	dirs           []string
	interval       time.Duration
	rescanInterval time.Duration
	staleAfter     time.Duration
	checkLiveness  bool   // ask the kernel before expiring an idle ring
	procfs         string // where to look for mappings when the lease probe cannot answer
	openElsewhere  func(*ringFile) (bool, error)
	bounds         []float64
	now            func() time.Time

	mu     sync.Mutex
	agents map[string]*agent // by agent name (file name), for scrapes
	errs   map[string]uint64 // nixl_collection_errors_total by collector
	// pendingErrs are failures not yet sent as partial errors, at most
	// one per source (the latest), so a persistent failure cannot flood
	// the host.
	pendingErrs map[string]pendingError
	expired     uint64

	// owned by the loop goroutine
	readers    map[string]*reader // by path
	rejected   map[string]fileSig // files that are no ring, until they change
	tombstones map[string]fileSig // expired rings, until they change
	duplicates map[string]fileID  // files whose agent name another directory has
	lastRescan time.Time
	scratch    []byte

	syncReq chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type pendingError struct {
	collector string
	err       error
}

// agent is the scrape side of one ring file.
type agent struct {
	name  string
	valid bool // a ring was mapped at least once: the agent_* series exist
	stats *agentStats
	// unread is the most events one drain found waiting since the
	// previous scrape (reset by snapshot).
	unread   uint64
	capacity uint64
	full     uint64
	errs     map[string]uint64 // by reason
}

// reader is the loop side of one ring file.
type reader struct {
	ring         *ringFile
	agent        *agent
	lastWritePos uint64
	lastProgress time.Time // write_pos last moved (or the ring was found)
	lastAlive    time.Time // last time procfs showed the file mapped
}

func newDrainer(c config, procfs string) *drainer {
	d := &drainer{
		dirs: c.TelemetryDirs, interval: c.DrainInterval.Duration, rescanInterval: c.RescanInterval.Duration,
		staleAfter: c.StaleAfter.Duration, bounds: c.HistogramBucketsUS.bounds, now: time.Now,
		agents: map[string]*agent{}, errs: map[string]uint64{}, pendingErrs: map[string]pendingError{},
		readers: map[string]*reader{}, rejected: map[string]fileSig{}, tombstones: map[string]fileSig{}, duplicates: map[string]fileID{},
		syncReq: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	d.checkLiveness, d.procfs, d.openElsewhere = c.livenessCheck(), procfs, (*ringFile).openElsewhere
	return d
}

// start runs the loop until stop.
func (d *drainer) start() { go d.loop() }

func (d *drainer) loop() {
	defer close(d.done)
	defer d.closeAll()
	d.pass(true)
	t := time.NewTimer(d.nextWake())
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.pass(false)
		case reply := <-d.syncReq:
			d.pass(true)
			close(reply)
		}
		t.Reset(d.nextWake())
	}
}

// nextWake is when the loop runs its next pass: every drain_interval while
// there is a ring to drain, and only every rescan_interval (to find the
// first one) while there is none, so that a host without NIXL agents
// wakes the plugin once a second instead of ten times.
func (d *drainer) nextWake() time.Duration {
	if len(d.readers) == 0 {
		return d.rescanInterval
	}
	return d.interval
}

// sync runs one full pass (rescan and drain) before a scrape, so that the
// scrape includes every event written until now. It gives up when done
// is closed (the scrape's deadline) or the drainer stopped.
func (d *drainer) sync(done <-chan struct{}) {
	reply := make(chan struct{})
	select {
	case d.syncReq <- reply:
	case <-d.done:
		return
	case <-done:
		return
	}
	select {
	case <-reply:
	case <-d.done:
	case <-done:
	}
}

// close stops the loop and unmaps every ring.
func (d *drainer) close() {
	d.once.Do(func() { close(d.stop) })
	<-d.done
}

func (d *drainer) closeAll() {
	for path, r := range d.readers {
		r.ring.close()
		delete(d.readers, path)
	}
}

// pass drains every ring, after listing the directories if rescan is
// set or rescan_interval has passed, then expires idle agents.
func (d *drainer) pass(rescan bool) {
	now := d.now()
	if rescan || now.Sub(d.lastRescan) >= d.rescanInterval {
		d.rescan()
		d.lastRescan = now
	}
	for path, r := range d.readers {
		d.drainOne(path, r, now)
	}
	d.expire(now)
}

// rescan lists the directories and reconciles the readers with the files.
func (d *drainer) rescan() {
	seen := map[string]bool{}
	byName := map[string]string{} // agent name -> the path that has it
	for _, dir := range d.dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // NIXL does not create it either: no agent yet
				d.fail(collectorDiscovery, dir, fmt.Errorf("list telemetry directory %s: %w", dir, err))
				// A listing that failed says nothing about the files:
				// keep draining what is mapped.
				for path := range d.readers {
					if filepath.Dir(path) == dir {
						seen[path] = true
					}
				}
			}
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				continue // an agent name with a '/' points below; not searched
			}
			path := filepath.Join(dir, e.Name())
			seen[path] = true
			if other, dup := byName[e.Name()]; dup {
				if id, err := statID(path); err != nil || d.duplicates[path] != id {
					d.duplicates[path] = id // reported once per file
					d.readerError(e.Name(), &formatError{reason: reasonDuplicateName,
						msg: fmt.Sprintf("%s: agent name %q is already read from %s; only that file is drained", path, e.Name(), other)})
				}
				continue
			}
			delete(d.duplicates, path)
			byName[e.Name()] = path
			d.track(path, e.Name())
		}
	}
	for path, r := range d.readers {
		if !seen[path] {
			d.drainOne(path, r, d.now()) // the mapping outlives the unlink: take what is left
			d.drop(path, r)
		}
	}
	for path := range d.rejected {
		if !seen[path] {
			delete(d.rejected, path)
			d.forget(filepath.Base(path))
		}
	}
	for path := range d.tombstones {
		if !seen[path] {
			delete(d.tombstones, path)
		}
	}
	for path := range d.duplicates {
		if !seen[path] {
			delete(d.duplicates, path)
		}
	}
}

// track makes sure path has a reader, unless it is a known non-ring or
// the ring of an expired agent and has not changed since.
func (d *drainer) track(path, name string) {
	if r, ok := d.readers[path]; ok {
		if id, err := statID(path); err == nil && id == r.ring.id {
			// An idle ring is not re-stated by its drains: check here
			// that the file still has the mapped size.
			serr := r.ring.checkSize()
			if serr == nil {
				return
			}
			if !errors.Is(serr, errReopen) {
				d.readerError(name, serr)
			}
		} else {
			// another file under the same name now (the agent re-created
			// it); the old mapping still holds the old file's rest
			d.drainOne(path, r, d.now())
		}
		r.ring.close()
		delete(d.readers, path)
	}
	if sig, ok := d.tombstones[path]; ok {
		if now, err := probeFile(path); err == nil && now == sig {
			return
		}
		delete(d.tombstones, path) // written again: a new incarnation
	}
	if sig, ok := d.rejected[path]; ok {
		if now, err := probeFile(path); err == nil && now == sig {
			return
		}
		delete(d.rejected, path)
	}
	ring, err := openRing(path)
	if err != nil {
		if sig, perr := probeFile(path); perr == nil {
			d.rejected[path] = sig
		}
		d.readerError(name, err)
		return
	}
	d.mu.Lock()
	a := d.agentLocked(name)
	if !a.valid {
		a.valid, a.stats = true, newAgentStats(d.bounds)
	}
	a.capacity = ring.capacity
	d.mu.Unlock()
	now := d.now()
	d.readers[path] = &reader{ring: ring, agent: a, lastProgress: now, lastAlive: now}
}

// drainOne drains one ring and adds its events to its agent.
func (d *drainer) drainOne(path string, r *reader, now time.Time) {
	res, err := r.ring.drain(&d.scratch)
	if errors.Is(err, errReopen) {
		ring, oerr := openRing(path)
		if oerr != nil {
			d.readerError(r.agent.name, oerr)
			d.drop(path, r)
			return
		}
		r.ring.close()
		r.ring = ring
		d.mu.Lock()
		r.agent.capacity = ring.capacity
		d.mu.Unlock()
		res, err = ring.drain(&d.scratch)
	}
	if err != nil {
		d.readerError(r.agent.name, err)
		var fe *formatError
		if errors.As(err, &fe) && fe.reason != reasonOpen {
			// Not a ring any more: unmap it; the next rescan maps it
			// again once it is one.
			d.drop(path, r)
		}
		return
	}
	if res.header.writePos != r.lastWritePos || res.header.unread() > 0 {
		r.lastProgress = now
	}
	r.lastWritePos = res.header.writePos
	d.mu.Lock()
	a := r.agent
	unknown := decodeSlots(res.run, r.ring.lay, a.stats)
	a.unread = max(a.unread, res.header.unread())
	if res.header.full() {
		a.full++
	}
	d.mu.Unlock()
	if unknown > 0 {
		d.readerErrorN(a.name, reasonUnknownEvent, unknown, fmt.Errorf("%s: %d events of a type the %s layout does not define were skipped", path, unknown, r.ring.lay.layoutTag))
	}
	if res.moved {
		d.readerError(a.name, &formatError{reason: reasonReadPosMoved,
			msg: fmt.Sprintf("%s: read_pos was moved by someone else (another consumer steals this agent's events, or the agent restarted)", path)})
	}
}

// drop closes a reader without a tombstone: its file is gone or broken.
// A file that is gone takes its agent's series with it; a broken one
// keeps them until it is removed or expires.
func (d *drainer) drop(path string, r *reader) {
	r.ring.close()
	delete(d.readers, path)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		d.forget(r.agent.name)
	}
}

// expire drops the agents whose rings have been idle for stale_after and
// that no process has open any more (liveness.go: the file carries no pid,
// so the kernel is asked).
func (d *drainer) expire(now time.Time) {
	var idle []string
	for path, r := range d.readers {
		if now.Sub(r.lastProgress) >= d.staleAfter && now.Sub(r.lastAlive) >= d.staleAfter {
			idle = append(idle, path)
		}
	}
	if len(idle) == 0 {
		return
	}
	alive := map[string]bool{}
	if d.checkLiveness {
		unknown := map[fileID]bool{}
		for _, path := range idle {
			r := d.readers[path]
			inUse, err := d.openElsewhere(r.ring)
			if err != nil {
				unknown[r.ring.id] = true // not the owner: ask procfs
				continue
			}
			alive[path] = inUse
		}
		if len(unknown) > 0 && d.procfs != "" {
			mapped, _ := mappedFiles(d.procfs, unknown)
			for _, path := range idle {
				if mapped[d.readers[path].ring.id] {
					alive[path] = true
				}
			}
		}
	}
	for _, path := range idle {
		r := d.readers[path]
		if alive[path] {
			r.lastAlive = now // idle but alive: ask again after stale_after
			continue
		}
		r.ring.close()
		delete(d.readers, path)
		if sig, err := probeFile(path); err == nil {
			d.tombstones[path] = sig
		}
		d.forget(r.agent.name)
		d.mu.Lock()
		d.expired++
		d.mu.Unlock()
	}
}

func (d *drainer) agentLocked(name string) *agent {
	a, ok := d.agents[name]
	if !ok {
		a = &agent{name: name, errs: map[string]uint64{}}
		d.agents[name] = a
	}
	return a
}

// forget removes an agent's series.
func (d *drainer) forget(name string) {
	for _, r := range d.readers {
		if r.agent.name == name {
			return // still read (a re-created file under the same name)
		}
	}
	d.mu.Lock()
	delete(d.agents, name)
	delete(d.pendingErrs, collectorReader+"/"+name)
	d.mu.Unlock()
}

// readerError counts one reader failure of the agent (file) name.
func (d *drainer) readerError(name string, err error) {
	reason := reasonOpen
	var fe *formatError
	if errors.As(err, &fe) {
		reason = fe.reason
	}
	d.readerErrorN(name, reason, 1, err)
}

func (d *drainer) readerErrorN(name, reason string, n uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.agentLocked(name).errs[reason] += n
	d.errs[collectorReader] += n
	d.pendingErrs[collectorReader+"/"+name] = pendingError{collectorReader, err}
}

// fail counts a failure that belongs to no agent.
func (d *drainer) fail(collector, source string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs[collector]++
	d.pendingErrs[collector+"/"+source] = pendingError{collector, err}
}

// snapshot is one scrape's copy of the drainer's state.
type snapshot struct {
	agents  []*agent // sorted by name, stats cloned
	errs    map[string]uint64
	pending []pendingError
	expired uint64
}

func (d *drainer) snapshot() snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := snapshot{errs: map[string]uint64{}, expired: d.expired}
	for _, a := range d.agents {
		c := *a
		if a.stats != nil {
			c.stats = a.stats.clone()
		}
		c.errs = map[string]uint64{}
		for k, v := range a.errs {
			c.errs[k] = v
		}
		s.agents = append(s.agents, &c)
		a.unread = 0
	}
	slices.SortFunc(s.agents, func(a, b *agent) int { return cmp.Compare(a.name, b.name) })
	for k, v := range d.errs {
		s.errs[k] = v
	}
	keys := make([]string, 0, len(d.pendingErrs))
	for k := range d.pendingErrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s.pending = append(s.pending, d.pendingErrs[k])
	}
	clear(d.pendingErrs)
	return s
}

package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// smartState is the cached outcome of a controller's SMART log reads.
type smartState struct {
	Log         *smartLog // last successfully read page (nil: none yet)
	LastSuccess time.Time
	Attempted   bool  // at least one read has finished
	Available   bool  // the latest read succeeded
	LastErr     error // error of the latest read, nil if it succeeded
}

// controllerPoll is one controller's cache entry. busy guarantees at most
// one in-flight read (ioctl) per controller: a round that finds the previous
// read still running skips the controller.
type controllerPoll struct {
	name string
	busy atomic.Bool

	mu          sync.Mutex
	st          smartState
	errSeq      uint64 // failed reads so far
	reportedSeq uint64 // failed reads already reported as partial errors
}

// poller reads the SMART log of every controller in the background, every
// interval, and serves the results from cache.
type poller struct {
	sysfs, devDir string
	interval      time.Duration
	open          openFunc
	now           func() time.Time
	log           *slog.Logger
	failed        func() // called once per failed read, for the error counter

	mu         sync.Mutex
	ctrls      map[string]*controllerPoll
	warnedPerm bool
	reads      atomic.Uint64 // finished reads, for tests

	loop *sdk.Poller    // calls round every interval
	wg   sync.WaitGroup // the reads in flight
}

func newPoller(sysfs, devDir string, interval time.Duration, open openFunc, now func() time.Time, log *slog.Logger, failed func()) *poller {
	p := &poller{
		sysfs: sysfs, devDir: devDir, interval: interval,
		open: open, now: now, log: log, failed: failed,
		ctrls: map[string]*controllerPoll{},
	}
	p.loop = sdk.NewPoller(interval, p.round)
	return p
}

// start runs the first round at once and then one every interval, until stop.
func (p *poller) start() { go p.loop.Run() }

// stop cancels the poller and waits for its goroutines, including reads in
// flight (a real ioctl cannot be interrupted; the kernel's admin timeout
// bounds it). Safe to call more than once.
func (p *poller) stop() {
	p.loop.Stop()
	p.wg.Wait()
}

// done is closed once the poller loop has returned.
func (p *poller) done() <-chan struct{} { return p.loop.Done() }

// round starts a read for every controller that has none in flight.
func (p *poller) round(ctx context.Context) {
	names, err := listControllers(p.sysfs)
	if err != nil {
		p.log.Warn("cannot list NVMe controllers", "error", err)
		return
	}
	p.mu.Lock()
	present := make(map[string]bool, len(names))
	todo := make([]*controllerPoll, 0, len(names))
	for _, n := range names {
		present[n] = true
		c := p.ctrls[n]
		if c == nil {
			c = &controllerPoll{name: n}
			p.ctrls[n] = c
		}
		todo = append(todo, c)
	}
	for n, c := range p.ctrls {
		// Forget removed controllers, but not while a read is in flight:
		// a controller that comes back must not get a second reader.
		if !present[n] && !c.busy.Load() {
			delete(p.ctrls, n)
		}
	}
	p.mu.Unlock()
	for _, c := range todo {
		if ctx.Err() != nil {
			return
		}
		if !c.busy.CompareAndSwap(false, true) {
			p.log.Debug("previous SMART read still in flight; skipping this round", "device", c.name)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.busy.Store(false)
			p.readOne(ctx, c)
		}()
	}
}

func (p *poller) readOne(ctx context.Context, c *controllerPoll) {
	path := filepath.Join(p.devDir, c.name)
	l, err := readSMART(ctx, p.open, path)
	if err != nil && ctx.Err() != nil {
		return // shutting down: not a device failure
	}
	defer p.reads.Add(1)
	c.mu.Lock()
	wasOK := !c.st.Attempted || c.st.Available
	prevErr := c.st.LastErr
	c.st.Attempted = true
	if err == nil {
		c.st.Log, c.st.LastSuccess, c.st.Available, c.st.LastErr = l, p.now(), true, nil
	} else {
		c.st.Available, c.st.LastErr = false, err
		p.failed()
		c.errSeq++
	}
	c.mu.Unlock()

	switch {
	case err == nil && !wasOK:
		p.log.Info("SMART log readable again", "device", c.name)
	case err != nil && isPermission(err):
		p.mu.Lock()
		first := !p.warnedPerm
		p.warnedPerm = true
		p.mu.Unlock()
		if first {
			p.log.Warn("NVMe SMART/Health log not readable: it needs CAP_SYS_ADMIN and read access to /dev/nvme*; "+
				"exporting controller identity only, nvme_smart_available is 0", "device", c.name, "error", err)
		}
	case err != nil && (prevErr == nil || prevErr.Error() != err.Error()):
		p.log.Warn("SMART log read failed", "device", c.name, "error", err)
	}
}

// state returns a copy of the controller's cache entry. unreported is the
// latest read's error if it failed and has not been handed out by an earlier
// call, so each failed read becomes exactly one partial error.
func (p *poller) state(name string) (st smartState, unreported error, ok bool) {
	p.mu.Lock()
	c := p.ctrls[name]
	p.mu.Unlock()
	if c == nil {
		return smartState{}, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.LastErr != nil && c.reportedSeq != c.errSeq {
		c.reportedSeq = c.errSeq
		unreported = c.st.LastErr
	}
	return c.st, unreported, c.st.Attempted
}

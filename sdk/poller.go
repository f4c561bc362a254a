package sdk

import (
	"context"
	"sync"
	"time"
)

// Poller runs a plugin's slow reads in the background, so that Collect
// serves their latest results at once instead of waiting for them (a SMART
// log ioctl, a network probe): Run calls round at once and then every
// interval until Stop.
//
// The plugin starts Run in a goroutine of its own (`go p.loop.Run()`), so
// that a goroutine dump names the plugin's code that started it. A round
// that starts goroutines of its own tracks them itself: Stop waits for the
// round in progress to return, not for what it started.
type Poller struct {
	interval time.Duration
	round    func(ctx context.Context)
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	running bool
}

// NewPoller returns a poller that calls round every interval once Run.
// round's context is cancelled by Stop; a round should return soon after.
func NewPoller(interval time.Duration, round func(ctx context.Context)) *Poller {
	ctx, cancel := context.WithCancel(context.Background())
	return &Poller{interval: interval, round: round, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Run calls round at once and then every interval, and returns once Stop
// has been called and the round in progress has returned. A Run while
// another runs, or after Stop, returns at once without a round.
func (p *Poller) Run() {
	p.mu.Lock()
	if p.running || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.running = true
	p.mu.Unlock()
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.round(p.ctx)
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			if p.ctx.Err() != nil {
				return // both were ready: Stop wins over a tick
			}
		}
	}
}

// Stop cancels the round in progress and, if Run has begun, waits until it
// has returned; no round starts after. Safe to call more than once.
func (p *Poller) Stop() {
	p.cancel()
	p.mu.Lock()
	running := p.running
	p.running = true // a Run from now on returns at once
	p.mu.Unlock()
	if !running {
		close(p.done) // Run never began: nothing to wait for
		return
	}
	<-p.done
}

// Done is closed once the poller has stopped: Stop has been called and no
// round runs any more.
func (p *Poller) Done() <-chan struct{} { return p.done }

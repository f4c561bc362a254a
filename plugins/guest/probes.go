package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// Probe kinds: the probe label.
const (
	probeICMP  = "icmp"
	probeNFS   = "nfs_null"
	probeHTTPS = "https"
)

// probeTarget is one probe of a round.
type probeTarget struct {
	probe, target string
	run           func(ctx context.Context) error
}

// probeResult is the latest outcome of one probe.
type probeResult struct {
	probe, target string
	success       bool
	duration      time.Duration
	at            time.Time
}

// errNoProbe marks a probe that could not be made at all (no socket): not a
// failure of the target, so it gets no result, only a counted error.
type errNoProbe struct{ err error }

func (e errNoProbe) Error() string { return e.err.Error() }
func (e errNoProbe) Unwrap() error { return e.err }

// notPermitted turns a socket the sandbox refuses (seccomp: EPERM for an
// IP socket without a network grant; Landlock: EACCES for a port not
// granted) into errNoProbe: the target did not fail, the plugin may not
// reach it.
func notPermitted(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)) {
		return errNoProbe{fmt.Errorf("%w (grant network.inet.tcp_connect for this port in the plugin's manifest; see README.md)", err)}
	}
	// The system's CA certificates unreadable (a sandbox without the
	// manifest's grant of them): the endpoint cannot be judged.
	var roots x509.SystemRootsError
	if errors.As(err, &roots) {
		return errNoProbe{fmt.Errorf("%w (the manifest grants /etc/ssl/certs and /etc/pki read-only; where the CA bundle lives elsewhere, grant that)", err)}
	}
	return err
}

// prober runs the probes every interval from a goroutine and keeps the
// latest results for the scrapes: a probe is a network round trip of up to
// the probe timeout, which a scrape must not wait for.
type prober struct {
	interval, timeout time.Duration
	targets           func() ([]probeTarget, error)
	now               func() time.Time
	log               warner
	failed            func() // called once per counted failure

	mu          sync.Mutex
	results     []probeResult
	lastErr     error
	errSeq      uint64
	reportedSeq uint64
	rounds      uint64

	loop *sdk.Poller // calls round every interval
}

func newProber(interval, timeout time.Duration, targets func() ([]probeTarget, error), log warner, failed func()) *prober {
	p := &prober{interval: interval, timeout: timeout, targets: targets, now: time.Now, log: log, failed: failed}
	p.loop = sdk.NewPoller(interval, p.round)
	return p
}

// start runs a round at once and then one every interval, until stop.
func (p *prober) start() { go p.loop.Run() }

// stop cancels the probes in flight and waits for the loop.
func (p *prober) stop() { p.loop.Stop() }

// round runs every probe in parallel, each bounded by the timeout, and
// replaces the results: a target that is gone (an NFS mount unmounted)
// loses its series.
func (p *prober) round(ctx context.Context) {
	targets, err := p.targets()
	if err != nil {
		p.fail(err)
	}
	results := make([]probeResult, len(targets))
	ok := make([]bool, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, p.timeout)
			defer cancel()
			start := p.now()
			err := t.run(pctx)
			if ctx.Err() != nil {
				return // stopping: not the target's fault
			}
			var none errNoProbe
			if errors.As(err, &none) {
				p.fail(fmt.Errorf("%s probe of %s: %w", t.probe, t.target, err))
				return
			}
			results[i] = probeResult{probe: t.probe, target: t.target, success: err == nil, duration: p.now().Sub(start), at: start}
			ok[i] = true
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	kept := results[:0]
	for i, r := range results {
		if ok[i] {
			kept = append(kept, r)
		}
	}
	p.mu.Lock()
	p.results = kept
	p.rounds++
	p.mu.Unlock()
}

func (p *prober) fail(err error) {
	p.failed()
	p.mu.Lock()
	first := p.errSeq == 0 || p.lastErr.Error() != err.Error()
	p.lastErr = err
	p.errSeq++
	p.mu.Unlock()
	if first {
		p.log.Warn("probe not made", "error", err)
	}
}

// snapshot returns the latest results and the latest failure if it has not
// been handed out yet.
func (p *prober) snapshot() ([]probeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var unreported error
	if p.reportedSeq != p.errSeq {
		p.reportedSeq = p.errSeq
		unreported = p.lastErr
	}
	return p.results, unreported
}

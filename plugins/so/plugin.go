package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// stuckGrace is how long a library's collect may overrun the moment the
// plugin gave up on it before the process exits: the C thread inside it
// cannot be stopped, and the next collect could not run, so the host's
// restart is the way out.
const stuckGrace = time.Second

type plugin struct {
	// open loads a library (dlopen, or errNoCgo); replaced in tests.
	open func(path string) (library, error)
	// exit ends the process when a library's collect is stuck; replaced
	// in tests.
	exit func(msg string)

	mu        sync.Mutex // one Collect at a time; guards the fields below
	lib       library    // nil without a library
	collector string     // the library's name, the collector label
	version   string     // the library's own version (its info's), for so_collector_info
	relay     *relay
	errs      uint64 // so_collection_errors_total
	stuck     error  // set while a collect the plugin gave up on has not returned
}

func newPlugin() *plugin {
	return &plugin{open: openLibrary, exit: exitStuck}
}

// instanceName is the plugin's name as the host discovered it: one binary
// serves several collectors when it is installed under several names
// (plexporter-so-<collector>, a symlink), and each reports its own.
func instanceName() string {
	if base := filepath.Base(os.Args[0]); strings.HasPrefix(base, "plexporter-so") {
		return strings.TrimPrefix(base, "plexporter-")
	}
	return "so"
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    instanceName(),
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
	}
}

// Configure loads the library the section names, checks its ABI version
// and catalogue and hands it its own settings. It runs once per process (a
// library cannot be unloaded safely), so a second Configure with another
// library is refused.
func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	var c config
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lib != nil {
		if p.lib.Path() != c.Library {
			return fmt.Errorf("library: %s is loaded in this process already; a new library needs a new process (the host starts one when the settings change)", p.lib.Path())
		}
		return nil
	}
	if c.Library == "" {
		cfg.Warn("library: not set, so this instance loads no collector and serves only so_collection_errors_total; set plugins.<name>.config.library to the collector's shared object")
		p.collector = "none"
		return nil
	}
	lib, err := p.open(c.Library)
	if err != nil {
		return fmt.Errorf("library: %w", err)
	}
	info := lib.Info()
	descs, err := info.families(c.Library)
	if err != nil {
		return fmt.Errorf("library: %w", err)
	}
	if err := lib.Configure(c.collectorJSON()); err != nil {
		return fmt.Errorf("collector: %s: %w", c.Library, err)
	}
	p.lib, p.collector, p.version, p.relay = lib, info.Name, info.Version, newRelay(info.Name, descs)
	return nil
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Exported from the first scrape on, at 0, so rate() works from zero.
	defer func() { w.Counter(descCollectionErrors, float64(p.errs), p.collector) }()
	if p.lib == nil {
		return nil
	}
	w.Gauge(descCollectorInfo, 1, p.collector, p.version)
	if p.stuck != nil {
		p.errs++
		w.Error(p.collector, p.stuck)
		return sdk.Failed(p.stuck)
	}
	libDeadline, giveUp := deadlines(ctx)
	p.relay.start(w)
	done := make(chan error, 1)
	go func() { done <- p.lib.Collect(p.relay, libDeadline) }()
	timer := time.NewTimer(time.Until(giveUp))
	defer timer.Stop()
	var err error
	returned := false
	select {
	case err = <-done:
		returned = true
	case <-timer.C:
	case <-ctx.Done():
	}
	p.errs += uint64(p.relay.stop())
	if !returned {
		select {
		case err = <-done: // returned while the relay was being stopped
		default:
			p.stuck = fmt.Errorf("collect of %s has not returned since its deadline %s; the plugin exits so that the host restarts it", p.lib.Path(), libDeadline.Format(time.RFC3339Nano))
			err = p.stuck
			go p.exitUnlessReturned(done)
		}
	}
	if err != nil {
		// The library's collect failed as a whole (it returned non-zero
		// or overran): what it emitted is sent, and the host counts the
		// collect as failed (plexporter_plugin_scrape_success 0).
		p.errs++
		w.Error(p.collector, err)
		return sdk.Failed(err)
	}
	return nil
}

// deadlines splits the host's deadline: the library is asked to return a
// tenth of the time (10 ms to 500 ms) early, and the plugin gives up on it
// half-way through that margin, leaving the other half to send what it
// emitted before the host's deadline cuts the stream.
func deadlines(ctx context.Context) (lib, giveUp time.Time) {
	host, ok := ctx.Deadline()
	if !ok {
		host = time.Now().Add(10 * time.Second)
	}
	margin := min(max(time.Until(host)/10, 10*time.Millisecond), 500*time.Millisecond)
	return host.Add(-margin), host.Add(-margin / 2)
}

// exitUnlessReturned ends the process unless the collect the plugin gave
// up on returns within stuckGrace.
func (p *plugin) exitUnlessReturned(done chan error) {
	select {
	case <-done:
		p.mu.Lock()
		p.stuck = nil
		p.mu.Unlock()
	case <-time.After(stuckGrace):
		p.mu.Lock()
		msg := p.stuck.Error()
		p.mu.Unlock()
		p.exit(msg)
	}
}

// exitStuck is how the process ends when a library's collect never
// returns: a C thread cannot be cancelled.
func exitStuck(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(3)
}

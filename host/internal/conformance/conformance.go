// Package conformance is `plexporter plugin check`: it runs a plugin binary
// against the plugin protocol (docs/plugin-protocol.md) and judges it rule
// by rule (rules.go). The plugin is started exactly as the host starts it —
// host/internal/launch, with the settings the fleet composes, in its
// manifest's sandbox or not — and then asked what the host asks, and what
// the host never asks but a plugin must survive: a malformed config, an
// allowlist, a cancelled Collect, its lifeline closed. Batches are judged by
// the host's own guard (internal/guard), never by a second implementation.
//
// Rules that need data (the guard, the catalogue, the allowlist) are
// skipped, with the reason, when the plugin sends no sample: a plugin on a
// machine without its hardware that answers with partial errors conforms.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/launch"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// SandboxMode says whether the plugin runs in its manifest's sandbox.
type SandboxMode string

const (
	// SandboxAuto sandboxes the plugin whenever the runner is root, as the
	// host does: in its manifest's sandbox, or with no grants at all when
	// no manifest sits beside the binary. Only a runner that is not root
	// (and cannot confine anything) runs it unconfined, as its own user.
	SandboxAuto SandboxMode = "auto"
	// SandboxOn always sandboxes (needs root), with no grants at all when
	// there is no manifest, as the host does.
	SandboxOn SandboxMode = "on"
	// SandboxOff runs the plugin unconfined, as the runner's user.
	SandboxOff SandboxMode = "off"
)

// Options for one run.
type Options struct {
	Binary  string
	Sandbox SandboxMode
	// Settings composes the plugin's settings as the host would, sandboxed
	// or not (fleet.SettingsFor on a fleet with those options), and the
	// warnings the host would log about them.
	Settings func(p discover.Plugin, sandboxed bool) (supervise.Settings, []string, error)
	// SandboxWorks says whether this host can sandbox plugins
	// (sandbox.CheckHost); it is asked only when the plugin is to be
	// sandboxed, and an error ends the run: it is the host's problem, not
	// the plugin's.
	SandboxWorks func() error
	// MaxLabelValueLen is the guard's --plugin.max-label-length.
	MaxLabelValueLen int
	// ReservedPrefixes are the host's own family prefixes (guard.HostPrefixes).
	ReservedPrefixes []string
	Log              *slog.Logger
}

// How long the runner waits for what the protocol says a plugin SHOULD do
// on its own.
const (
	// The rules that ask whether a plugin exits at all (without the cookie,
	// once its lifeline reads EOF) wait generously: an interpreter's start
	// on a loaded machine takes seconds (a Python plugin was seen still
	// importing grpc after 5 s), and a plugin that never exits fails either way.
	cookieWait   = 30 * time.Second      // exit without the magic cookie
	stopGrace    = 2 * time.Second       // go-plugin's: then the host kills the group
	lifelineWait = 30 * time.Second      // exit once the lifeline reads EOF
	cancelAfter  = 25 * time.Millisecond // at the earliest, cancel a Collect that has sent nothing yet
	cancelGrace  = time.Second           // the next Collect may take this much longer than usual
	repeats      = 3                     // Collects after the first, for collect.stable
	// upAfter is how long after its last Collect the first process must
	// still run: a plugin that gives up on a stuck collect and exits so
	// that the host restarts it (plexporter-so with a hanging library)
	// answers the Collects right after it, and is gone a second later.
	upAfter = 2 * time.Second
)

// nothingMatches is an allowlist pattern no plugin family can match: the
// plexporter_ prefix is the host's own.
const nothingMatches = "plexporter_check_matches_no_family"

// Run checks the binary and returns the report. An error means the runner
// itself cannot work (--sandbox=on without root); a plugin that fails to
// start is a report with FAILs.
func Run(o Options) (*Report, error) {
	abs, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, err
	}
	c := &checker{o: o, log: o.Log, results: map[string]Result{}, rep: &Report{Binary: abs, Mode: "not started"}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	defer c.finish()
	p, err := Locate(abs)
	if err != nil {
		c.fail("binary.name", "%v", err)
		c.skipRest("the host would not run this file")
		return c.rep, nil
	}
	c.p = p
	c.rep.Plugin = p.Name
	c.pass("binary.name", "plugin %s", p.Name)

	sandboxed := false
	switch o.Sandbox {
	case SandboxOn:
		if os.Geteuid() != 0 {
			return nil, errors.New("--sandbox=on needs root: only root can confine a plugin (use --sandbox=auto or off)")
		}
		sandboxed = true
	case SandboxAuto, "":
		// Not only with a manifest: a binary without one would run as root,
		// unconfined, where the host gives it the no-grant sandbox
		// (issue 28 item 6).
		sandboxed = os.Geteuid() == 0
	case SandboxOff:
	default:
		return nil, fmt.Errorf("unknown sandbox mode %q (auto, on or off)", o.Sandbox)
	}
	if sandboxed && o.SandboxWorks != nil {
		if err := o.SandboxWorks(); err != nil {
			return nil, fmt.Errorf("cannot sandbox %s: %w (--sandbox=off runs it unconfined)", p.Path, err)
		}
	}
	c.rep.Mode = modeText(sandboxed, p)
	s, warnings, err := o.Settings(p, sandboxed)
	if err != nil {
		c.fail("manifest", "%v", err)
		c.skipRest("the host would refuse the plugin")
		return c.rep, nil
	}
	c.s = s.WithDefaults()
	c.manifest(sandboxed, warnings)
	c.cookie()
	c.checkPlugin()
	return c.rep, nil
}

func modeText(sandboxed bool, p discover.Plugin) string {
	switch {
	case !sandboxed:
		return "unconfined"
	case p.Manifest == "":
		return "sandboxed, no manifest: no grants"
	}
	return "sandboxed by " + p.Manifest
}

// Locate finds the plugin at path as the host's discovery would, in the
// directory it sits in; an error says why the host would not run it.
func Locate(path string) (discover.Plugin, error) {
	res := discover.Scan([]string{filepath.Dir(path)})
	for _, p := range res.Plugins {
		if p.Path == path {
			return p, nil
		}
	}
	for _, r := range res.Refused {
		if r.Path == path {
			return discover.Plugin{}, fmt.Errorf("%s: %s", path, r.Reason)
		}
	}
	base := filepath.Base(path)
	if _, err := os.Lstat(path); err != nil {
		return discover.Plugin{}, err
	}
	if !strings.HasPrefix(base, discover.Prefix) {
		return discover.Plugin{}, fmt.Errorf("%s: not named %s<name>: the host does not look at it (rename it)", path, discover.Prefix)
	}
	return discover.Plugin{}, fmt.Errorf("%s: <name> %q does not match ^[a-z0-9][a-z0-9_-]*$: the host does not run it (rename it)", path, strings.TrimPrefix(base, discover.Prefix))
}

// checker holds one run's state.
type checker struct {
	o        Options
	log      *slog.Logger
	p        discover.Plugin
	s        supervise.Settings // with defaults
	rep      *Report
	results  map[string]Result
	skipAll  string         // reason for every rule not recorded
	stopping sync.WaitGroup // instances being stopped (retire)

	info      *pluginv1.InfoResponse
	base      *collection     // the first Collect
	prefixed  *collection     // metric-prefix's Collect, once it passed
	durations []time.Duration // of the successful Collects of the main instance
}

func (c *checker) record(rule string, st Status, format string, args ...any) {
	if _, done := c.results[rule]; done {
		return
	}
	c.results[rule] = Result{Rule: rule, What: ruleByID(rule).What, Status: st, Detail: fmt.Sprintf(format, args...)}
}

func (c *checker) pass(rule, format string, args ...any) { c.record(rule, Pass, format, args...) }
func (c *checker) fail(rule, format string, args ...any) { c.record(rule, Fail, format, args...) }
func (c *checker) skip(rule, format string, args ...any) { c.record(rule, Skip, format, args...) }

// skipRest skips every rule not recorded yet.
func (c *checker) skipRest(why string) {
	if c.skipAll == "" {
		c.skipAll = why
	}
}

// finish puts the results in the report in the rules' order.
func (c *checker) finish() {
	c.stopping.Wait()
	for _, r := range Rules {
		res, ok := c.results[r.ID]
		if !ok {
			why := c.skipAll
			if why == "" {
				why = "not run"
			}
			res = Result{Rule: r.ID, What: r.What, Status: Skip, Detail: why}
		}
		c.rep.add(res)
	}
}

func (c *checker) manifest(sandboxed bool, warnings []string) {
	var what string
	switch {
	case !sandboxed && c.p.Manifest != "":
		what = "not applied: the plugin runs unconfined (the manifest was read and is valid)"
	case !sandboxed:
		what = "none; the plugin runs unconfined"
	case c.p.Manifest == "":
		what = "none: the plugin runs in the sandbox with no grants"
	default:
		what = "applied: " + c.p.Manifest
	}
	if len(warnings) > 0 {
		what += "; the host warns: " + strings.Join(warnings, "; ")
	}
	c.pass("manifest", "%s", what)
}

// instance is one started plugin process.
type instance struct {
	proc   *launch.Process
	client pluginv1.PluginServiceClient
	// started is when the handshake was over: Info and Configure share the
	// start timeout from there, as in the host.
	ctx    context.Context
	cancel context.CancelFunc
	// lastCollect is when its last Collect through checker.collect ended.
	lastCollect time.Time
}

func (in *instance) stop() {
	in.cancel()
	in.proc.Stop()
}

// retire stops an instance the run is done with in the background: a
// plugin that does not exit costs the host's 2 s grace at every stop, and
// the run need not wait for each. finish waits for all of them.
func (c *checker) retire(in *instance) {
	c.stopping.Go(in.stop)
}

// alive reports whether the process is still running.
func (in *instance) alive() bool {
	select {
	case <-in.proc.Exited():
		return false
	default:
		return true
	}
}

// start launches the plugin with settings s, as the host does.
func (c *checker) start(s supervise.Settings) (*instance, time.Duration, error) {
	began := time.Now()
	proc, err := launch.Start(c.p, s.LaunchOptions(), c.log)
	took := time.Since(began)
	if err != nil {
		return nil, took, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.StartTimeout)
	return &instance{proc: proc, client: proc.Client(), ctx: ctx, cancel: cancel}, took, nil
}

// configured starts the plugin with settings s and takes it through Info
// and Configure; the error is Configure's, or why it did not get there.
func (c *checker) configured(s supervise.Settings) (*instance, error) {
	in, _, err := c.start(s)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if _, err := in.client.Info(in.ctx, &pluginv1.InfoRequest{}, wire.MaxMessage); err != nil {
		c.retire(in)
		return nil, fmt.Errorf("Info: %w", err)
	}
	if _, err := in.client.Configure(in.ctx, s.ConfigureRequest(), wire.MaxMessage); err != nil {
		c.retire(in)
		return nil, fmt.Errorf("Configure: %w", err)
	}
	return in, nil
}

// checkPlugin runs every rule from the handshake on.
func (c *checker) checkPlugin() {
	main, took, err := c.start(c.s)
	if err != nil {
		c.fail("handshake", "after %v: %v", round(took), err)
		c.skipRest("the handshake failed")
		return
	}
	defer c.retire(main)
	c.pass("handshake", "in %v", round(took))
	if !c.describe(main) {
		c.skipRest("Info failed")
		return
	}
	if !c.configure(main) {
		c.skipRest("Configure failed")
		return
	}
	c.malformed()
	c.collectRules(main)
	c.allowlists()
	c.prefixRule()
	c.prefixedAllowlist()
	c.stopRule()
	c.stayedUp(main)
	c.lifeline(main)
}

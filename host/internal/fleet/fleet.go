// Package fleet keeps the running plugins in line with what is on disk:
// it scans the plugin directories and the config file, composes each
// plugin's settings (settings.go), starts new plugins, stops removed ones
// and replaces replaced or reconfigured ones, on SIGHUP and whenever a
// plugin directory changes.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/host/internal/trust"
)

// Options for the fleet.
type Options struct {
	Dirs       []string
	ConfigFile string
	// Defaults for every plugin; the config file overrides per plugin.
	Defaults supervise.Settings
	// Sandbox confines plugins (the host must be root); false runs them as
	// the host's user, unconfined (development only).
	Sandbox bool
	// AllowRoot lets manifests with allow_root run plugins as uid 0.
	AllowRoot bool
	// AllowAnyUnixConnect: see sandbox.Host.
	AllowAnyUnixConnect bool
	// AllowMissingDirs makes a plugin directory that does not exist a
	// warning; otherwise it fails Reconcile, naming the directory (a typo
	// in --plugin.dir would leave a ready host with no plugin).
	AllowMissingDirs bool
	// InsecurePermissions lifts the ownership/mode rules (trust.Policy) on
	// plugin binaries, manifests, the config file and the directories and
	// symlinks on the way to them. Files are still read safely.
	InsecurePermissions bool
	// Loaded, when set, sees every config file a reconcile reads (the
	// host's own sections: push:).
	Loaded func(*config.File)
}

// AllowMissingDirsFlag is the host's flag for Options.AllowMissingDirs.
const AllowMissingDirsFlag = "--plugin.allow-missing-dir"

// insecurePermissionsFlag lifts the rules; refusals name it.
const insecurePermissionsFlag = "--plugin.insecure-permissions"

// Refusal is a plugin that was found but not run: it cannot be run (not an
// executable, a dangling link, a symlink loop: Plugin then has only Name and
// Path), someone but root could have written or swapped it or its manifest,
// or its manifest cannot be read or honoured here. (A binary that does not
// match its pin is refused by its supervisor, at the start it would have
// run.)
type Refusal struct {
	Plugin discover.Plugin
	Reason string
}

// Fleet is the set of supervised plugins.
type Fleet struct {
	opts  Options
	log   *slog.Logger
	trust trust.Policy // what binaries, manifests and the config file must be

	reconciling sync.Mutex // one Reconcile at a time; StopAll waits for one under way

	mu       sync.Mutex
	sups     map[string]*supervise.Supervisor
	rejected map[string]rejection
	refused  map[string]Refusal
	disabled map[string]discover.Plugin
	scanned  bool
	stopped  bool
	warned   map[string]bool
	reload   Reload
}

// Reload is the outcome of the last reading of the config file and the
// plugin directories (start, SIGHUP, POST /-/reload, a directory change).
type Reload struct {
	Successful  bool
	LastSuccess time.Time // zero before the first success
}

func (f *Fleet) recordReload(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reload.Successful = err == nil
	if err == nil {
		f.reload.LastSuccess = time.Now()
	}
}

// LastReload returns the outcome of the last reload.
func (f *Fleet) LastReload() Reload {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reload
}

// Rescan reloads now, as SIGHUP does, logging why; a broken config file
// keeps the running plugins and is returned.
func (f *Fleet) Rescan(why string) error {
	f.log.Info("rescanning plugins", "reason", why)
	err := f.Reconcile()
	if err != nil {
		f.log.Error("rescan failed; keeping the running plugins", "err", err)
	}
	return err
}

// rejection remembers settings a plugin rejected on a rescan while its
// instance on the previous settings kept running: they are not tried again
// until the config file (or the binary) changes.
type rejection struct {
	identity string
	settings supervise.Settings
	message  string // the plugin's own
}

// New returns an empty fleet; call Reconcile to populate it.
func New(opts Options, log *slog.Logger) *Fleet {
	return &Fleet{
		opts: opts, log: log, trust: trustPolicy(opts),
		sups: map[string]*supervise.Supervisor{}, rejected: map[string]rejection{},
		refused: map[string]Refusal{}, disabled: map[string]discover.Plugin{}, warned: map[string]bool{},
	}
}

// trustPolicy applies the ownership/mode rules under the sandbox only:
// without it a plugin has the host's own privileges whatever its files say,
// so the rules would protect nothing.
func trustPolicy(opts Options) trust.Policy {
	return trust.Policy{Strict: opts.Sandbox && !opts.InsecurePermissions, Override: insecurePermissionsFlag}
}

// wanted is a plugin the disk and the config file say should run.
type wanted struct {
	plugin   discover.Plugin
	settings supervise.Settings
}

// trial is a replacement started beside the instance it is to replace.
type trial struct {
	name     string
	old, new *supervise.Supervisor
}

// Reconcile rescans and converges. A broken config file keeps the current
// plugins running and returns the error.
//
// A running plugin whose binary or settings changed is replaced
// new-before-old: the new instance starts beside the running one, and takes
// over only if it does not reject its settings. A section the plugin
// rejects therefore keeps it running on its previous settings, as a broken
// config file keeps every plugin: the operator's typo costs a log line and a
// self-metric, not the plugin's series. A plugin that is not running
// (crashed, misconfigured) is simply replaced.
//
// It reads the disk and the config file (scan), decides what to do (plan,
// without side effects) and does it (apply).
func (f *Fleet) Reconcile() error {
	f.reconciling.Lock()
	defer f.reconciling.Unlock()
	d, err := f.scan()
	if err != nil {
		return err
	}

	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return nil
	}
	for _, w := range d.warnings {
		if key := w[0] + "\x00" + w[1]; !f.warned[key] {
			f.warned[key] = true
			f.log.Warn(w[1], "plugin", w[0])
		}
	}
	for name, r := range d.refused {
		if prev, ok := f.refused[name]; !ok || prev.Reason != r.Reason {
			f.log.Error("plugin refused", "plugin", name, "path", r.Plugin.Path, "reason", r.Reason)
		}
	}
	f.refused, f.disabled, f.scanned = d.refused, d.disabled, true
	actions := plan(f.instances(), d.want)
	f.mu.Unlock()

	f.apply(actions)
	return nil
}

// desired is what a scan found: the plugins to run with their settings,
// those refused or disabled, and the warnings composing their settings
// gave (plugin, text).
type desired struct {
	want     map[string]wanted
	refused  map[string]Refusal
	disabled map[string]discover.Plugin
	warnings [][2]string
}

// scan reads the config file and the plugin directories and composes the
// settings of every plugin found. Its error (a broken config file, a
// missing plugin directory) leaves the fleet as it is.
func (f *Fleet) scan() (desired, error) {
	cfg, err := config.Load(f.opts.ConfigFile, f.trust)
	f.recordReload(err)
	if err != nil {
		return desired{}, err
	}
	if f.opts.Loaded != nil {
		f.opts.Loaded(cfg)
	}
	scan := discover.Scan(f.opts.Dirs)
	for _, p := range scan.Problems {
		f.log.Warn("ignoring a file in a plugin directory", "err", p)
	}
	// Said on every scan, once per directory: a wrong --plugin.dir or a
	// package not installed otherwise looks like a healthy host with
	// nothing to say. An empty directory beside others that hold plugins is
	// normal (the operators' own, /etc/plexporter/plugins.d, often is).
	if len(scan.Missing) > 0 && !f.opts.AllowMissingDirs {
		err := fmt.Errorf("plugin directory %s does not exist: correct --plugin.dir (PLEXPORTER_PLUGIN_DIR) or create the directory, or pass %s if it may be missing", strings.Join(scan.Missing, ", "), AllowMissingDirsFlag)
		f.recordReload(err)
		return desired{}, err
	}
	for _, d := range scan.Missing {
		f.log.Warn("plugin directory does not exist", "dir", d)
	}
	for _, d := range scan.Empty {
		if len(scan.Plugins)+len(scan.Refused) == 0 {
			f.log.Warn("plugin directory holds no plugin (plexporter-<name> executable)", "dir", d)
		} else {
			f.log.Info("plugin directory holds no plugin", "dir", d)
		}
	}
	for _, s := range scan.Shadowed {
		f.log.Info("plugin shadowed by a later plugin directory", "plugin", s.Name, "ignored", s.Path, "used", s.By)
	}

	d := desired{want: map[string]wanted{}, refused: map[string]Refusal{}, disabled: map[string]discover.Plugin{}}
	for _, r := range scan.Refused {
		p := discover.Plugin{Name: r.Name, Path: r.Path}
		if !cfg.Plugins[r.Name].IsEnabled() {
			d.disabled[r.Name] = p
			continue
		}
		d.refused[r.Name] = Refusal{Plugin: p, Reason: r.Reason}
	}
	for _, p := range scan.Plugins {
		pc := cfg.Plugins[p.Name]
		if !pc.IsEnabled() {
			d.disabled[p.Name] = p
			continue
		}
		settings, warns, err := f.settings(p, cfg)
		for _, w := range warns {
			d.warnings = append(d.warnings, [2]string{p.Name, w})
		}
		if err != nil {
			d.refused[p.Name] = Refusal{Plugin: p, Reason: err.Error()}
			continue
		}
		d.want[p.Name] = wanted{p, settings}
	}
	for name, pc := range cfg.Plugins {
		if pc.OnlyOptIn() {
			// Consent for a plugin that may not be installed on every node
			// (the shipped config opts in for the shipped privileged
			// plugins): nothing to warn about.
			continue
		}
		if _, found := d.want[name]; !found && d.disabled[name].Name == "" && d.refused[name].Plugin.Name == "" {
			f.log.Warn("config file configures a plugin that is not installed", "plugin", name, "dirs", f.opts.Dirs)
		}
	}
	return d, nil
}

// instances describes the supervised plugins for plan. f.mu is held.
func (f *Fleet) instances() map[string]instance {
	out := make(map[string]instance, len(f.sups))
	for name, sup := range f.sups {
		in := instance{identity: sup.Plugin().Identity, settings: sup.Settings(), running: sup.Status().State == supervise.Running}
		if r, ok := f.rejected[name]; ok {
			in.rejected = &r
		}
		out[name] = in
	}
	return out
}

// apply carries out plan's actions: it stops what is to go (outside the
// lock: a graceful stop may take seconds, and scrapes, which list the
// supervisors, must not wait for it; a plugin that is simply replaced is
// gone before its replacement starts), starts what is new and tries the
// replacements of running plugins.
func (f *Fleet) apply(actions []action) {
	var retire []*supervise.Supervisor
	var trials []trial
	f.mu.Lock()
	for _, a := range actions {
		switch a.step {
		case stepStop:
			f.log.Info("plugin removed; stopping", "plugin", a.name)
			retire = append(retire, f.sups[a.name])
			delete(f.sups, a.name)
			delete(f.rejected, a.name)
		case stepRestart:
			f.log.Info(a.why+"; restarting", "plugin", a.name)
			retire = append(retire, f.sups[a.name])
			delete(f.sups, a.name)
			delete(f.rejected, a.name)
		case stepTry:
			f.log.Info(a.why+"; starting the new instance beside the running one", "plugin", a.name)
			delete(f.rejected, a.name)
			trials = append(trials, trial{name: a.name, old: f.sups[a.name], new: supervise.New(a.want.plugin, a.want.settings, f.log)})
		case stepForget:
			f.log.Info("plugin settings are back to the ones it runs with", "plugin", a.name)
			delete(f.rejected, a.name)
		}
	}
	f.mu.Unlock()

	stopAll(retire)

	f.mu.Lock()
	for _, a := range actions {
		if a.step == stepStart || a.step == stepRestart {
			sup := supervise.New(a.want.plugin, a.want.settings, f.log)
			f.sups[a.name] = sup
			sup.Start()
		}
	}
	f.mu.Unlock()

	f.try(trials)
}

// try starts each replacement beside the running instance and waits for its
// first start. One that rejects its settings is stopped and remembered, and
// the running instance stays; any other outcome (running, or failed for
// another reason, which restarting may fix) takes over.
func (f *Fleet) try(trials []trial) {
	var wg sync.WaitGroup
	for _, t := range trials {
		t.new.Start()
		wg.Go(func() { <-t.new.FirstAttempt() })
	}
	wg.Wait()
	var retire []*supervise.Supervisor
	f.mu.Lock()
	for _, t := range trials {
		if st := t.new.Status(); st.State == supervise.Misconfigured {
			f.rejected[t.name] = rejection{identity: t.new.Plugin().Identity, settings: t.new.Settings(), message: st.LastError}
			f.log.Info("new settings rejected; the running instance keeps its previous settings until the config file changes", "plugin", t.name)
			retire = append(retire, t.new)
			continue
		}
		f.sups[t.name] = t.new
		retire = append(retire, t.old)
	}
	f.mu.Unlock()
	stopAll(retire)
}

func stopAll(sups []*supervise.Supervisor) {
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

// settings composes one plugin's settings and confines it, or refuses it
// (error) when its binary or manifest is not trusted, or its manifest
// cannot be read or honoured.
func (f *Fleet) settings(p discover.Plugin, cfg *config.File) (supervise.Settings, []string, error) {
	pc, loc := cfg.Plugins[p.Name], cfg.ConfigLocation(p.Name)
	if err := f.trustBinary(p); err != nil {
		return supervise.Settings{}, nil, err
	}
	m, err := manifest.Load(p.Manifest, f.trust)
	if err != nil {
		return supervise.Settings{}, nil, err
	}
	s, err := compose(f.opts.Defaults, pc, loc, m)
	if err != nil {
		return s, nil, err
	}
	// Capabilities beyond the known-safe ones only with the operator's
	// opt-in; they are granted only under the sandbox.
	if f.opts.Sandbox && !skipCapabilityOptIn {
		if err := cfg.CapabilityOptIn(p.Name, p.Manifest, s.Manifest); err != nil {
			return s, nil, err
		}
	}
	s, warns, err := f.confine(p, s)
	if ge := (*sandbox.GrantError)(nil); errors.As(err, &ge) {
		where := "manifest " + p.Manifest
		if p.Manifest == "" {
			where = "the default manifest"
		}
		if pc.Manifest != nil {
			where += fmt.Sprintf(" with the config file's plugins.%s.manifest override", p.Name)
		}
		err = fmt.Errorf("%s: %w", where, err)
	}
	if p.Manifest == "" && pc.Manifest == nil && f.opts.Sandbox {
		// Logged once (Reconcile): the plugin runs, but a plugin that reads
		// anything fails in ways that do not say "write a manifest".
		warns = append([]string{fmt.Sprintf("plugin has no manifest (%s%s beside %s): it runs in the default sandbox, which grants nothing: the %s user (else nobody), no capability, no path, no device, no network, no environment variable", p.Path, discover.ManifestSuffix, p.Path, sandbox.DefaultUser)}, warns...)
	}
	return s, warns, err
}

// Status is what the fleet knows about one supervised plugin, for
// self-metrics and `plexporter plugins`.
type Status struct {
	supervise.Status
	// Rejected is the plugin's own message about the settings the config
	// file has for it now, when a rescan tried them and the plugin rejected
	// them; the instance in Status runs on the previous ones.
	Rejected string
}

// Misconfigured reports whether the plugin rejects the settings the config
// file has for it (whether or not an instance on older ones runs).
func (s Status) Misconfigured() bool {
	return s.State == supervise.Misconfigured || s.Rejected != ""
}

// Statuses returns every supervised plugin's status, sorted by name.
func (f *Fleet) Statuses() []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Status, 0, len(f.sups))
	for name, s := range f.sups {
		out = append(out, Status{Status: s.Status(), Rejected: f.rejected[name].message})
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Supervisors returns the running supervisors sorted by plugin name.
func (f *Fleet) Supervisors() []*supervise.Supervisor {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*supervise.Supervisor, 0, len(f.sups))
	for _, s := range f.sups {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plugin().Name < out[j].Plugin().Name })
	return out
}

// Refused returns plugins that were found but not run, sorted by name.
func (f *Fleet) Refused() []Refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Refusal, 0, len(f.refused))
	for _, r := range f.refused {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Refusal) int { return strings.Compare(a.Plugin.Name, b.Plugin.Name) })
	return out
}

// Known returns the name of every plugin the last scan found, sorted:
// supervised (whatever its state), refused, or disabled in the config file.
// A scrape may select any of them; a name not among them is a typo.
func (f *Fleet) Known() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := slices.Concat(slices.Collect(maps.Keys(f.sups)), slices.Collect(maps.Keys(f.refused)), slices.Collect(maps.Keys(f.disabled)))
	slices.Sort(names)
	return slices.Compact(names)
}

// Ready reports whether the first scan happened and every plugin has
// started or failed its first start.
func (f *Fleet) Ready() bool { return f.Readiness(0) == nil }

// Readiness is nil once the first scan happened, every plugin has started
// or failed its first start, and at least minRunning plugins run; else it
// says what is missing.
func (f *Fleet) Readiness(minRunning int) error {
	f.mu.Lock()
	scanned := f.scanned
	f.mu.Unlock()
	if !scanned {
		return errors.New("plugin directories not scanned yet")
	}
	sups := f.Supervisors()
	running := 0
	for _, s := range sups {
		st := s.Status()
		if !st.Started {
			return fmt.Errorf("plugin %s is still starting", st.Name)
		}
		if st.Up() {
			running++
		}
	}
	if running < minRunning {
		return fmt.Errorf("%d of %d plugins running, fewer than --web.ready-min-plugins=%d", running, len(sups), minRunning)
	}
	return nil
}

// StopAll stops every plugin, in parallel, after a Reconcile under way;
// later Reconciles do nothing.
func (f *Fleet) StopAll() {
	f.reconciling.Lock()
	defer f.reconciling.Unlock()
	f.mu.Lock()
	sups := slices.Collect(maps.Values(f.sups))
	f.sups, f.rejected, f.stopped = map[string]*supervise.Supervisor{}, map[string]rejection{}, true
	f.mu.Unlock()
	stopAll(sups)
}

// Watch reconciles on every signal from hup and on changes in the plugin
// directories (debounced), until ctx ends.
func (f *Fleet) Watch(ctx context.Context, hup <-chan os.Signal) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.log.Warn("cannot watch plugin directories; rescan with SIGHUP", "err", err)
	} else {
		defer w.Close()
		for _, d := range f.opts.Dirs {
			if err := w.Add(d); err != nil && !os.IsNotExist(err) {
				f.log.Warn("cannot watch plugin directory; rescan with SIGHUP", "dir", d, "err", err)
			}
		}
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	var debounce <-chan time.Time
	reconcile := func(why string) { _ = f.Rescan(why) }
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reconcile("SIGHUP")
		case ev := <-events:
			f.log.Debug("plugin directory changed", "event", ev.String())
			debounce = time.After(300 * time.Millisecond)
		case err := <-errs:
			f.log.Warn("plugin directory watch", "err", err)
		case <-debounce:
			debounce = nil
			reconcile("plugin directory changed")
		}
	}
}

// Describe returns a one-line description of a refusal, for CLI output.
func (r Refusal) Describe() string {
	return fmt.Sprintf("%s (%s): %s", r.Plugin.Name, r.Plugin.Path, r.Reason)
}

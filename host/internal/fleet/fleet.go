// Package fleet keeps the running plugins in line with what is on disk:
// it scans the plugin directories and the config file, starts new plugins,
// stops removed ones and restarts replaced or reconfigured ones, on SIGHUP
// and whenever a plugin directory changes.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
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
	// InsecurePermissions skips the ownership/mode checks of plugin binaries.
	InsecurePermissions bool
}

// Refusal is a plugin that was found but not run.
type Refusal struct {
	Plugin discover.Plugin
	Reason string
}

// Fleet is the set of supervised plugins.
type Fleet struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sups     map[string]*supervise.Supervisor
	refused  map[string]Refusal
	disabled map[string]discover.Plugin
	scanned  bool
	warned   map[string]bool
}

// New returns an empty fleet; call Reconcile to populate it.
func New(opts Options, log *slog.Logger) *Fleet {
	return &Fleet{opts: opts, log: log, sups: map[string]*supervise.Supervisor{}, refused: map[string]Refusal{}, disabled: map[string]discover.Plugin{}, warned: map[string]bool{}}
}

// Reconcile rescans and converges. A broken config file keeps the current
// plugins running and returns the error.
func (f *Fleet) Reconcile() error {
	cfg, err := config.Load(f.opts.ConfigFile)
	if err != nil {
		return err
	}
	scan := discover.Scan(f.opts.Dirs)
	for _, p := range scan.Problems {
		f.log.Warn("ignoring plugin", "err", p)
	}
	for _, s := range scan.Shadowed {
		f.log.Info("plugin shadowed by a later plugin directory", "plugin", s.Name, "ignored", s.Path, "used", s.By)
	}

	var warnings []string
	wanted := map[string]supervise.Settings{}
	plugins := map[string]discover.Plugin{}
	refused := map[string]Refusal{}
	disabled := map[string]discover.Plugin{}
	for _, p := range scan.Plugins {
		pc := cfg.Plugins[p.Name]
		if !pc.IsEnabled() {
			disabled[p.Name] = p
			continue
		}
		settings, warns, err := f.settings(p, pc)
		for _, w := range warns {
			warnings = append(warnings, "plugin "+p.Name+": "+w)
		}
		if err != nil {
			refused[p.Name] = Refusal{Plugin: p, Reason: err.Error()}
			continue
		}
		wanted[p.Name] = settings
		plugins[p.Name] = p
	}
	for name := range cfg.Plugins {
		if _, found := plugins[name]; !found && disabled[name].Name == "" && refused[name].Plugin.Name == "" {
			f.log.Warn("config file configures a plugin that is not installed", "plugin", name, "dirs", f.opts.Dirs)
		}
	}

	f.mu.Lock()
	for _, w := range warnings {
		if !f.warned[w] {
			f.warned[w] = true
			f.log.Warn(w)
		}
	}
	for name, r := range refused {
		if prev, ok := f.refused[name]; !ok || prev.Reason != r.Reason {
			f.log.Error("plugin refused", "plugin", name, "path", r.Plugin.Path, "reason", r.Reason)
		}
	}
	f.refused, f.disabled, f.scanned = refused, disabled, true
	var stopping []*supervise.Supervisor
	for name, sup := range f.sups {
		settings, ok := wanted[name]
		switch {
		case !ok:
			f.log.Info("plugin removed; stopping", "plugin", name)
		case sup.Plugin().Identity != plugins[name].Identity:
			f.log.Info("plugin binary replaced; restarting", "plugin", name)
		case !sup.Settings().Equal(settings):
			f.log.Info("plugin settings changed; restarting", "plugin", name)
		default:
			continue
		}
		stopping = append(stopping, sup)
		delete(f.sups, name)
	}
	f.mu.Unlock()

	// Stop outside the lock: a graceful stop may take seconds, and scrapes
	// (which list the supervisors) must not wait for it. An old instance is
	// gone before its replacement starts.
	var wg sync.WaitGroup
	for _, sup := range stopping {
		wg.Go(sup.Stop)
	}
	wg.Wait()

	f.mu.Lock()
	defer f.mu.Unlock()
	for name, settings := range wanted {
		if _, running := f.sups[name]; running {
			continue
		}
		sup := supervise.New(plugins[name], settings, f.log)
		f.sups[name] = sup
		sup.Start()
	}
	return nil
}

// settings combines defaults, config file and manifest for one plugin, and
// refuses the plugin (error) when its manifest cannot be honoured.
func (f *Fleet) settings(p discover.Plugin, pc config.Plugin) (supervise.Settings, []string, error) {
	s := f.opts.Defaults
	m, err := manifest.Load(p.Manifest)
	if err != nil {
		return s, nil, err
	}
	m = manifest.Merge(m, pc.Manifest)
	if pc.Timeout > 0 {
		s.Timeout = pc.Timeout
	}
	if pc.MaxSeries > 0 {
		s.MaxSeries = pc.MaxSeries
	}
	s.MetricPrefix = pc.MetricPrefix
	if s.Config, err = pc.Struct(); err != nil {
		return s, nil, err
	}
	s.SHA256 = m.SHA256
	if m.SHA256 != "" {
		sum, err := supervise.FileSHA256(p.Target)
		if err != nil {
			return s, nil, err
		}
		if !strings.EqualFold(sum, m.SHA256) {
			return s, nil, fmt.Errorf("sha256 of %s is %s, the manifest pins %s: refusing a binary that is not the one pinned", p.Target, sum, m.SHA256)
		}
	}
	s.Env = nil
	for _, name := range m.Env {
		if v, ok := os.LookupEnv(name); ok {
			s.Env = append(s.Env, name+"="+v)
		}
	}
	if !f.opts.Sandbox {
		return s, nil, nil
	}
	if !f.opts.InsecurePermissions {
		if err := sandbox.CheckPermissions(p.Path, p.Target); err != nil {
			return s, nil, err
		}
	}
	spec, warnings, err := sandbox.Resolve(m, p.Target, p.Path, sandbox.Host{AllowRoot: f.opts.AllowRoot})
	if err != nil {
		return s, warnings, err
	}
	s.Sandbox = spec
	return s, warnings, nil
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

// Ready reports whether the first scan happened and every plugin has
// started or failed its first start.
func (f *Fleet) Ready() bool {
	f.mu.Lock()
	scanned := f.scanned
	f.mu.Unlock()
	if !scanned {
		return false
	}
	for _, s := range f.Supervisors() {
		if !s.Status().Started {
			return false
		}
	}
	return true
}

// StopAll stops every plugin, in parallel.
func (f *Fleet) StopAll() {
	f.mu.Lock()
	sups := f.sups
	f.sups = map[string]*supervise.Supervisor{}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Go(s.Stop)
	}
	wg.Wait()
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
	reconcile := func(why string) {
		f.log.Info("rescanning plugins", "reason", why)
		if err := f.Reconcile(); err != nil {
			f.log.Error("rescan failed; keeping the running plugins", "err", err)
		}
	}
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

package fleet

import (
	"fmt"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/host/internal/supervise"
)

// compose is the one place a plugin's settings are made: the host's
// defaults (flags), overridden by the plugin's section of the config file,
// with what its manifest (the file beside the binary, merged with the config
// file's manifest override) says about the checksum pin and the host
// variables passed on.
//
// It does no I/O, so its unit test covers every rule; reading the manifest
// before it and confining the plugin after it (confine) are separate steps.
func compose(defaults supervise.Settings, pc config.Plugin, loc config.Location, m *manifest.Manifest) (supervise.Settings, error) {
	s := defaults
	m = manifest.Merge(m, pc.Manifest)
	s.Manifest = m
	s.ConfigLocation = loc
	if pc.Timeout > 0 {
		s.Timeout = pc.Timeout
	}
	if pc.MaxSeries > 0 {
		s.MaxSeries = pc.MaxSeries
	}
	s.MetricPrefix = pc.MetricPrefix
	var err error
	if s.Config, err = pc.Struct(); err != nil {
		return s, err
	}
	s.SHA256 = m.SHA256
	s.PassEnv = m.Env
	return s, nil
}

// trustBinary refuses p (an error) when someone but root or the host's
// user could have written its binary or could swap it: the file, every
// directory on the way to the link and to the target, every symlink
// followed (trust.Policy's rules, applied under the sandbox only).
func (f *Fleet) trustBinary(p discover.Plugin) error {
	if !f.trust.Strict {
		return nil
	}
	target, _, err := f.trust.Executable(p.Path)
	if err != nil {
		return err
	}
	if target != p.Target {
		return fmt.Errorf("%s resolved to %s when scanned and to %s now; refused until the next rescan", p.Path, p.Target, target)
	}
	return nil
}

// confine adds the sandbox to settings composed for p, or refuses the plugin
// (an error) when its manifest cannot be honoured here. It asks the system
// (users, capabilities, Landlock), which compose does not.
func (f *Fleet) confine(p discover.Plugin, s supervise.Settings) (supervise.Settings, []string, error) {
	if !f.opts.Sandbox {
		return s, nil, nil
	}
	spec, warnings, err := sandbox.Resolve(s.Manifest, p.Target, p.Path, sandbox.Host{
		AllowRoot:           f.opts.AllowRoot,
		AllowAnyUnixConnect: f.opts.AllowAnyUnixConnect,
		Roots:               roots(s),
	})
	if err != nil {
		return s, warnings, err
	}
	s.Sandbox = spec
	return s, warnings, nil
}

// roots are the --path.* roots the plugin is told (its settings' Paths),
// which its manifest's placeholders stand for: the sandbox grants what the
// plugin will read.
func roots(s supervise.Settings) manifest.Roots {
	return manifest.Roots{Sysfs: s.Paths.GetSysfs(), Procfs: s.Paths.GetProcfs(), Rootfs: s.Paths.GetRootfs()}
}

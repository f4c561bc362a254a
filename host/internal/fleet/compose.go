package fleet

import (
	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/supervise"
)

// SettingsFor composes the settings this fleet would run p with — the
// config file's section for it, its manifest, the sandbox, with the same
// trust rules — and returns the warnings the fleet would log, without
// starting anything: `plexporter plugin check` starts a plugin exactly as
// the host would, but asks it things the host never does.
func (f *Fleet) SettingsFor(p discover.Plugin) (supervise.Settings, []string, error) {
	cfg, err := config.Load(f.opts.ConfigFile, f.trust)
	if err != nil {
		return supervise.Settings{}, nil, err
	}
	return f.settings(p, cfg)
}

// Config reads --config.file with the trust rules the fleet applies to
// it, for the host's own sections (push:).
func (f *Fleet) Config() (*config.File, error) {
	return config.Load(f.opts.ConfigFile, f.trust)
}

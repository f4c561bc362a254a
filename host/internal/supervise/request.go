package supervise

import (
	"github.com/plexporter/plexporter/host/internal/launch"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/transport"
)

// LaunchOptions say how launch starts a plugin with these settings.
func (s Settings) LaunchOptions() launch.Options { return s.withDefaults().launchOptions() }

// ConfigureRequest is what the host sends a plugin with these settings.
// The supervisor sends it; `plexporter plugin check` sends it too, and
// variations of it the host never sends.
func (s Settings) ConfigureRequest() *pluginv1.ConfigureRequest {
	return &pluginv1.ConfigureRequest{
		Config:          s.Config,
		EnabledMetrics:  s.Enabled,
		DisabledMetrics: s.Disabled,
		MetricPrefix:    s.MetricPrefix,
		Paths:           s.Paths,
		HostApiVersion:  transport.APIVersion,
		DeviceInclude:   s.DeviceInclude,
		DeviceExclude:   s.DeviceExclude,
	}
}

// WithDefaults returns the settings with the supervisor's defaults filled
// in (timeouts, restart policy).
func (s Settings) WithDefaults() Settings { return s.withDefaults() }

package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

const (
	// defaultProbeInterval: per-VM probing is for fleet aggregates (is
	// the NFS server answering every VM?), not for one VM's alerting, so
	// a probe every few minutes is enough (as the Crusoe exporter has it).
	defaultProbeInterval = 5 * time.Minute
	// minimumProbeInterval keeps a fleet from probing its servers several
	// times a second by a typo.
	minimumProbeInterval = 10 * time.Second
	defaultProbeTimeout  = 10 * time.Second
)

// config is the plugin's section of the host configuration
// (plugins.probe.config); the json tags are its keys. They are the keys
// the probes had under plugins.guest.config.
type config struct {
	// ProbeInterval is the time between probe rounds.
	ProbeInterval sdk.Duration `json:"probe_interval"`
	// ProbeTimeout bounds each probe.
	ProbeTimeout sdk.Duration `json:"probe_timeout"`
	// ICMPTargets are hosts to send an ICMP echo to.
	ICMPTargets []string `json:"icmp_targets"`
	// NFSProbe sends an NFS NULL RPC to every NFS server in the mount
	// table.
	NFSProbe bool `json:"nfs_probe"`
	// HTTPSEndpoints are URLs to GET (object-store endpoints).
	HTTPSEndpoints []string `json:"https_endpoints"`
	// MountinfoPID is the process whose mount table lists the NFS servers
	// (<procfs>/<pid>/mountinfo); 0 is the plugin's own (self).
	MountinfoPID int `json:"mountinfo_pid"`
}

// defaultConfig returns the settings of an empty section.
func defaultConfig() config {
	return config{
		ProbeInterval: sdk.Duration{Duration: defaultProbeInterval},
		ProbeTimeout:  sdk.Duration{Duration: defaultProbeTimeout},
	}
}

// validate checks the settings, naming the key of the first bad one, and
// normalises the targets.
func (c *config) validate() error {
	if c.MountinfoPID < 0 {
		return fmt.Errorf("mountinfo_pid: %d is not a process id (0 for the plugin's own mount table)", c.MountinfoPID)
	}
	if d := c.ProbeInterval.Duration; d < minimumProbeInterval {
		return fmt.Errorf("probe_interval: %s is below the minimum of %s", d, minimumProbeInterval)
	}
	if d := c.ProbeTimeout.Duration; d <= 0 || d >= c.ProbeInterval.Duration {
		return fmt.Errorf("probe_timeout: %s must be above 0 and below probe_interval (%s)", d, c.ProbeInterval.Duration)
	}
	for i, h := range c.ICMPTargets {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, " /:") && net.ParseIP(h) == nil {
			return fmt.Errorf("icmp_targets[%d]: %q is not a host name or IP address", i, c.ICMPTargets[i])
		}
		c.ICMPTargets[i] = h
	}
	for i, raw := range c.HTTPSEndpoints {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("https_endpoints[%d]: %w", i, err)
		}
		if u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("https_endpoints[%d]: %q is not an https:// URL with a host", i, raw)
		}
		c.HTTPSEndpoints[i] = u.String()
	}
	return nil
}

// probesEnabled tells whether any probe is configured; without one the
// prober does not run.
func (c *config) probesEnabled() bool {
	return c.NFSProbe || len(c.ICMPTargets) > 0 || len(c.HTTPSEndpoints) > 0
}

package main

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table
// and checks where each one lands.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	p := newPlugin()
	t.Cleanup(func() { p.Close() })
	var c config
	p.readMounts = func(procfs.FS, int) ([]*procfs.MountInfo, error) { return nil, nil }
	err := sdktest.Configure(t, p, map[string]any{
		"probe_interval": "1m",
		"probe_timeout":  "5s",
		// Loopback only: Configure starts the prober, whose first round
		// runs at once.
		"icmp_targets":    []any{" 127.0.0.1", "::1", "localhost"},
		"nfs_probe":       true,
		"https_endpoints": []any{"https://127.0.0.1:1/health"},
		"mountinfo_pid":   1,
	}, sdk.Paths{})
	if err != nil {
		t.Fatal(err)
	}
	c = p.cfg
	if c.ProbeInterval.Duration != time.Minute || c.ProbeTimeout.Duration != 5*time.Second || !c.NFSProbe ||
		!slices.Equal(c.ICMPTargets, []string{"127.0.0.1", "::1", "localhost"}) ||
		!slices.Equal(c.HTTPSEndpoints, []string{"https://127.0.0.1:1/health"}) || c.MountinfoPID != 1 || p.prober == nil {
		t.Errorf("probes configured %+v (prober %v)", c, p.prober)
	}

	// The defaults.
	p = newPlugin()
	t.Cleanup(func() { p.Close() })
	if err := sdktest.Configure(t, p, nil, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	c = p.cfg
	if c.ProbeInterval.Duration != defaultProbeInterval || c.ProbeTimeout.Duration != defaultProbeTimeout ||
		c.NFSProbe || c.MountinfoPID != 0 || p.prober != nil {
		t.Errorf("defaults %+v", c)
	}
}

// TestConfigureRejects: each bad setting is refused with a message that
// names its key.
func TestConfigureRejects(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"mountinfo_pid": -1}, Key: "mountinfo_pid", Detail: "-1 is not a process id"},
		{Raw: map[string]any{"mountinfo_pid": "init"}, Key: "mountinfo_pid", Detail: ": got "},
		{Raw: map[string]any{"probe_interval": "1s"}, Key: "probe_interval", Detail: "below the minimum of 10s"},
		{Raw: map[string]any{"probe_interval": "often"}, Key: "probe_interval", Detail: "invalid duration"},
		{Raw: map[string]any{"probe_timeout": "5m"}, Key: "probe_timeout", Detail: "below probe_interval (5m0s)"},
		{Raw: map[string]any{"probe_timeout": 0}, Key: "probe_timeout", Detail: "must be above 0"},
		{Raw: map[string]any{"icmp_targets": []any{"10.0.0.1", "http://x"}}, Key: "icmp_targets[1]", Detail: "not a host name or IP address"},
		{Raw: map[string]any{"icmp_targets": []any{""}}, Key: "icmp_targets[0]", Detail: "not a host name or IP address"},
		{Raw: map[string]any{"https_endpoints": []any{"http://object.example"}}, Key: "https_endpoints[0]", Detail: "not an https:// URL"},
		{Raw: map[string]any{"https_endpoints": []any{"https://"}}, Key: "https_endpoints[0]", Detail: "not an https:// URL with a host"},
		{Raw: map[string]any{"https_endpoints": []any{"https://a/%zz"}}, Key: "https_endpoints[0]", Detail: "invalid URL escape"},
		{Raw: map[string]any{"nfs_probe": "yes"}, Key: "nfs_probe", Detail: ": got "},
		{Raw: map[string]any{"unknown_key": 1}, Key: "unknown_key", Detail: "unknown key"},
	})
}

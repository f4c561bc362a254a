package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Each bad setting is refused with a message that names its key and says
// what is wrong.
func TestConfigureErrors(t *testing.T) {
	for _, tc := range []struct {
		raw         map[string]any
		key, detail string
	}{
		{map[string]any{"include": "("}, "include: ", "missing closing )"},
		{map[string]any{"exclude": "a**"}, "exclude: ", "invalid nested repetition"},
		{map[string]any{"driver_stat_exclude": "[", "driver_stats": true}, "driver_stat_exclude: ", "missing closing ]"},
		{map[string]any{"driver_stat_include": "(?P<"}, "driver_stat_include: ", "invalid"},
		{map[string]any{"max_driver_stats_per_netdev": -1}, "max_driver_stats_per_netdev: ", "must be positive, got -1"},
		{map[string]any{"max_driver_stats_per_netdev": 0}, "max_driver_stats_per_netdev: ", "must be positive, got 0"},
		{map[string]any{"typo_key": true}, `"typo_key"`, "unknown field"},
		{map[string]any{"rdma": "yes"}, "rdma", "cannot unmarshal"},
	} {
		err := sdktest.Configure(t, newTestPlugin(newFakeSource(t, nil)), tc.raw, sdk.Paths{})
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%v: error %v, want mention of %q and %q", tc.raw, err, tc.key, tc.detail)
		}
	}
}

// An empty section gives the README's defaults.
func TestConfigureDefaults(t *testing.T) {
	p := newTestPlugin(newFakeSource(t, nil))
	if err := sdktest.Configure(t, p, nil, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if !c.rdma() || !c.requireDevice() || !c.standardStats() || c.DriverStats || c.MaxDriverStatsPerNetdev != 1000 ||
		c.include != nil || c.exclude != nil || c.statInclude != nil || c.statExclude != nil {
		t.Errorf("defaults: %+v", c)
	}
}

// Every key of the README's table is accepted and takes effect.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	p := newTestPlugin(newFakeSource(t, nil))
	err := sdktest.Configure(t, p, map[string]any{
		"rdma": false, "driver_stats": true, "standard_stats": false, "include": "^ens", "exclude": "v[0-9]+$",
		"require_device": false, "driver_stat_include": "_phy$", "driver_stat_exclude": "^rx_err_lane",
		"max_driver_stats_per_netdev": 50,
	}, sdk.Paths{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if c.rdma() || !c.DriverStats || c.standardStats() || c.requireDevice() || c.MaxDriverStatsPerNetdev != 50 {
		t.Errorf("settings: %+v", c)
	}
	for _, m := range []struct {
		key  string
		re   *regexp.Regexp
		name string
	}{
		{"include", c.include, "ens1f0np0"}, {"exclude", c.exclude, "ens1f0v0"},
		{"driver_stat_include", c.statInclude, "rx_bits_phy"}, {"driver_stat_exclude", c.statExclude, "rx_err_lane_0_phy"},
	} {
		if m.re == nil || !m.re.MatchString(m.name) {
			t.Errorf("%s: %v does not match %s", m.key, m.re, m.name)
		}
	}
}

// A refused section leaves the running settings whole: nothing of it is
// applied (the regexps compiled before the bad one included).
func TestConfigureRefusedKeepsSettings(t *testing.T) {
	p := newTestPlugin(newFakeSource(t, nil))
	if err := sdktest.Configure(t, p, map[string]any{"include": "^eth", "driver_stats": true}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if err := sdktest.Configure(t, p, map[string]any{"include": "^ens", "exclude": "(", "driver_stats": false}, sdk.Paths{}); err == nil {
		t.Fatal("bad exclude accepted")
	}
	if p.cfg.Include != "^eth" || !p.cfg.include.MatchString("eth0") || p.cfg.include.MatchString("ens1") || p.cfg.exclude != nil || !p.cfg.DriverStats {
		t.Errorf("settings after a refused section: %+v", p.cfg)
	}
}

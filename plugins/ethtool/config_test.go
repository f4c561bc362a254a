package main

import (
	"regexp"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Each bad setting is refused with a message that names its key and says
// what is wrong.
func TestConfigureErrors(t *testing.T) {
	sdktest.Refuses(t, func() *plugin { return newTestPlugin(newFakeSource(t, nil)) }, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"include": "("}, Key: "include: ", Detail: "missing closing )"},
		{Raw: map[string]any{"exclude": "a**"}, Key: "exclude: ", Detail: "invalid nested repetition"},
		{Raw: map[string]any{"driver_stat_exclude": "[", "driver_stats": true}, Key: "driver_stat_exclude: ", Detail: "missing closing ]"},
		{Raw: map[string]any{"driver_stat_include": "(?P<"}, Key: "driver_stat_include: ", Detail: "invalid"},
		{Raw: map[string]any{"max_driver_stats_per_netdev": -1}, Key: "max_driver_stats_per_netdev: ", Detail: "must be positive, got -1"},
		{Raw: map[string]any{"max_driver_stats_per_netdev": 0}, Key: "max_driver_stats_per_netdev: ", Detail: "must be positive, got 0"},
		{Raw: map[string]any{"typo_key": true}, Key: "typo_key", Detail: "unknown key"},
		{Raw: map[string]any{"rdma": "yes"}, Key: "rdma", Detail: ": got "},
	})
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

package main

import (
	"slices"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Each bad setting is refused with a message that names its key.
func TestConfigureErrors(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"exclude_devices": []any{"mlx5_0", ""}}, Key: "exclude_devices[1]: ", Detail: "empty device name"},
		{Raw: map[string]any{"exclude_device": []any{"mlx5_0"}}, Key: "exclude_device", Detail: "unknown key"},
		{Raw: map[string]any{"exclude_devices": "mlx5_0"}, Key: "exclude_devices", Detail: ": got "},
		{Raw: map[string]any{"optional_counters": "yes"}, Key: "optional_counters", Detail: ": got "},
		{Raw: map[string]any{"qp_counters": 1}, Key: "qp_counters", Detail: ": got "},
	})
}

// An empty section: optional counters on, QP counters off, nothing excluded.
func TestConfigureDefaults(t *testing.T) {
	p := newPlugin()
	if err := sdktest.Configure(t, p, nil, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if !p.optional || p.qp || len(p.sysfs.exclude) != 0 {
		t.Errorf("defaults: optional=%v qp=%v exclude=%v", p.optional, p.qp, p.sysfs.exclude)
	}
}

// Every key of the README's table is accepted and takes effect; a refused
// section leaves the running settings.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	p := newPlugin()
	if err := sdktest.Configure(t, p, map[string]any{"exclude_devices": []any{"mlx5_1", "rxe0"}, "optional_counters": false, "qp_counters": true}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	var excluded []string
	for d := range p.sysfs.exclude {
		excluded = append(excluded, d)
	}
	slices.Sort(excluded)
	if p.optional || !p.qp || !slices.Equal(excluded, []string{"mlx5_1", "rxe0"}) {
		t.Errorf("settings: optional=%v qp=%v exclude=%v", p.optional, p.qp, excluded)
	}
	if err := sdktest.Configure(t, p, map[string]any{"exclude_devices": []any{""}, "qp_counters": false}, sdk.Paths{}); err == nil {
		t.Fatal("empty device name accepted")
	}
	if !p.qp || len(p.sysfs.exclude) != 2 {
		t.Errorf("a refused section changed the settings: qp=%v exclude=%v", p.qp, p.sysfs.exclude)
	}
}

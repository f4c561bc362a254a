package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Each bad setting is refused with a message that names its key.
func TestConfigureErrors(t *testing.T) {
	for _, tc := range []struct {
		raw         map[string]any
		key, detail string
	}{
		{map[string]any{"exclude_devices": []any{"mlx5_0", ""}}, "exclude_devices[1]: ", "empty device name"},
		{map[string]any{"exclude_device": []any{"mlx5_0"}}, `"exclude_device"`, "unknown field"},
		{map[string]any{"exclude_devices": "mlx5_0"}, "exclude_devices", "cannot unmarshal"},
		{map[string]any{"optional_counters": "yes"}, "optional_counters", "cannot unmarshal"},
		{map[string]any{"qp_counters": 1}, "qp_counters", "cannot unmarshal"},
	} {
		err := sdktest.Configure(t, newPlugin(), tc.raw, sdk.Paths{})
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%v: error %v, want mention of %q and %q", tc.raw, err, tc.key, tc.detail)
		}
	}
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

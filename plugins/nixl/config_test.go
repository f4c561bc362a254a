package main

import (
	"slices"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table
// and checks where each one lands.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	dir := t.TempDir()
	p := newPlugin()
	defer p.Close()
	err := sdktest.Configure(t, p, map[string]any{
		"telemetry_dirs":       []any{dir, dir + "/"},
		"drain_interval":       "50ms",
		"rescan_interval":      2,
		"stale_after":          "10m",
		"histogram_buckets_us": " 1.5, 10 ,100",
		"hostname":             "gpu-node-7",
		"liveness_check":       false,
	}, sdk.Paths{Procfs: "/host/proc"})
	if err != nil {
		t.Fatal(err)
	}
	d := p.drainer
	if !slices.Equal(d.dirs, []string{dir}) || d.interval != 50*time.Millisecond || d.rescanInterval != 2*time.Second ||
		d.staleAfter != 10*time.Minute || !slices.Equal(p.bounds, []float64{1.5, 10, 100}) || p.hostname != "gpu-node-7" || d.checkLiveness {
		t.Errorf("configured %+v, drainer %+v", p, d)
	}

	// a list of numbers works as well as NIXL's text
	p = newPlugin()
	defer p.Close()
	if err := sdktest.Configure(t, p, map[string]any{"histogram_buckets_us": []any{5, 50}}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.bounds, []float64{5, 50}) {
		t.Errorf("bounds %v", p.bounds)
	}

	// the defaults
	p = newPlugin()
	defer p.Close()
	if err := sdktest.Configure(t, p, nil, sdk.Paths{Procfs: "/host/proc"}); err != nil {
		t.Fatal(err)
	}
	d = p.drainer
	if !slices.Equal(d.dirs, []string{"/run/nixl/telemetry"}) || d.interval != 100*time.Millisecond || d.rescanInterval != time.Second ||
		d.staleAfter != 5*time.Minute || !slices.Equal(p.bounds, defaultBucketsUS) || p.hostname == "" || !d.checkLiveness || d.procfs != "/host/proc" {
		t.Errorf("defaults %+v, drainer %+v", p, d)
	}
}

// TestConfigureRejects: each bad setting is refused with a message that
// names its key; the bucket rules are NIXL's (finite, > 0, strictly
// increasing), with no silent fallback to the defaults.
func TestConfigureRejects(t *testing.T) {
	newP := func() *plugin { return newPlugin() }
	sdktest.Refuses(t, newP, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"histogram_buckets_us": []any{10, 10}}, Key: "histogram_buckets_us", Detail: "bound 1: 10 is not greater than the previous bound 10"},
		{Raw: map[string]any{"histogram_buckets_us": "10,25,20"}, Key: "histogram_buckets_us", Detail: "bound 2: 20 is not greater than the previous bound 25"},
		{Raw: map[string]any{"histogram_buckets_us": []any{0, 10}}, Key: "histogram_buckets_us", Detail: "bound 0: 0 is not positive"},
		{Raw: map[string]any{"histogram_buckets_us": []any{-5}}, Key: "histogram_buckets_us", Detail: "bound 0: -5 is not positive"},
		{Raw: map[string]any{"histogram_buckets_us": "10,inf"}, Key: "histogram_buckets_us", Detail: "bound 1: +Inf is not finite"},
		{Raw: map[string]any{"histogram_buckets_us": "10,NaN"}, Key: "histogram_buckets_us", Detail: "bound 1: NaN is not finite"},
		{Raw: map[string]any{"histogram_buckets_us": "10,,20"}, Key: "histogram_buckets_us", Detail: `bound 1: "" is not a number`},
		{Raw: map[string]any{"histogram_buckets_us": "10us"}, Key: "histogram_buckets_us", Detail: `bound 0: "10us" is not a number`},
		{Raw: map[string]any{"histogram_buckets_us": ""}, Key: "histogram_buckets_us", Detail: `bound 0: "" is not a number`},
		{Raw: map[string]any{"histogram_buckets_us": []any{}}, Key: "histogram_buckets_us", Detail: "empty"},
		{Raw: map[string]any{"histogram_buckets_us": []any{"a"}}, Key: "histogram_buckets_us", Detail: `bound 0: "a" is not a number`},
		{Raw: map[string]any{"histogram_buckets_us": 10}, Key: "histogram_buckets_us", Detail: "neither a list of numbers nor a comma-separated string"},
		{Raw: map[string]any{"histogram_buckets_us": make([]any, 33)}, Key: "histogram_buckets_us", Detail: "33 bounds, at most 32"},
		{Raw: map[string]any{"telemetry_dirs": []any{}}, Key: "telemetry_dirs", Detail: "empty"},
		{Raw: map[string]any{"telemetry_dirs": []any{"/a", ""}}, Key: "telemetry_dirs[1]", Detail: "empty path"},
		{Raw: map[string]any{"telemetry_dirs": []any{"nixl"}}, Key: "telemetry_dirs[0]", Detail: `"nixl" is not an absolute path`},
		{Raw: map[string]any{"telemetry_dirs": "/a"}, Key: "telemetry_dirs", Detail: ": got "},
		{Raw: map[string]any{"drain_interval": "1ms"}, Key: "drain_interval", Detail: "1ms is below the minimum of 10ms"},
		{Raw: map[string]any{"drain_interval": "1m"}, Key: "drain_interval", Detail: "1m0s is above the maximum of 10s"},
		{Raw: map[string]any{"drain_interval": "soon"}, Key: "drain_interval", Detail: "invalid duration"},
		{Raw: map[string]any{"drain_interval": true}, Key: "drain_interval", Detail: "neither a duration string"},
		{Raw: map[string]any{"rescan_interval": "50ms"}, Key: "rescan_interval", Detail: "50ms is below the minimum of 100ms"},
		{Raw: map[string]any{"stale_after": "500ms"}, Key: "stale_after", Detail: "500ms is below the minimum of 1s"},
		{Raw: map[string]any{"hostname": "a\nb"}, Key: "hostname", Detail: "contains a NUL or newline"},
		{Raw: map[string]any{"liveness_check": "yes"}, Key: "liveness_check", Detail: ": got "},
		{Raw: map[string]any{"buffer_size": 4096}, Key: "buffer_size", Detail: "unknown key"},
	})
}

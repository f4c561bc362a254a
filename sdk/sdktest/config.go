package sdktest

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// Config builds the sdk.Config the host would send at Configure, for tests
// that call a plugin's Configure directly: raw is the plugin's config
// section (nil for none), paths default to the host's defaults (/sys, /proc,
// /) where empty, and the filter enables everything.
func Config(t testing.TB, raw map[string]any, paths sdk.Paths) sdk.Config {
	t.Helper()
	s, err := structpb.NewStruct(raw)
	if err != nil {
		t.Fatalf("sdktest.Config: %v", err)
	}
	f, err := metricfilter.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if paths.Sysfs == "" {
		paths.Sysfs = "/sys"
	}
	if paths.Procfs == "" {
		paths.Procfs = "/proc"
	}
	if paths.Rootfs == "" {
		paths.Rootfs = "/"
	}
	return sdk.Config{Raw: s, Filter: f, Paths: paths}
}

// Configure calls p's Configure as the host would, with Config(t, raw,
// paths), and returns its error, for config tests that check what a plugin
// accepts and how it refuses the rest.
func Configure(t testing.TB, p sdk.Plugin, raw map[string]any, paths sdk.Paths) error {
	t.Helper()
	return p.Configure(t.Context(), Config(t, raw, paths))
}

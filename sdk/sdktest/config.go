package sdktest

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/internal/testhook"
	"github.com/plexporter/plexporter/sdk/metricfilter"
	"github.com/plexporter/plexporter/sdk/transport"
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
	return testhook.WithConfigSection(sdk.Config{Filter: f, Paths: paths, HostAPIVersion: transport.APIVersion}, s).(sdk.Config)
}

// Configure calls p's Configure as the host would, with Config(t, raw,
// paths), and returns its error, for config tests that check what a plugin
// accepts and how it refuses the rest.
func Configure(t testing.TB, p sdk.Plugin, raw map[string]any, paths sdk.Paths) error {
	t.Helper()
	return p.Configure(t.Context(), Config(t, raw, paths))
}

// Refusal is a config section Configure must refuse, and what its error
// must say: the key it names (errors start with the key, see
// plugins/README.md) and a detail of what is wrong.
type Refusal struct {
	Raw         map[string]any
	Key, Detail string
}

// Refuses configures a fresh plugin from newPlugin with each refusal's
// section and fails the test for every section that is accepted, or refused
// with an error that lacks its Key or Detail.
func Refuses[P sdk.Plugin](t testing.TB, newPlugin func() P, paths sdk.Paths, refusals []Refusal) {
	t.Helper()
	for _, r := range refusals {
		err := Configure(t, newPlugin(), r.Raw, paths)
		if err == nil || !strings.Contains(err.Error(), r.Key) || !strings.Contains(err.Error(), r.Detail) {
			t.Errorf("%v: error %v, want mention of %q and %q", r.Raw, err, r.Key, r.Detail)
		}
	}
}

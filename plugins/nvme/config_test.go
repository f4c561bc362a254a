package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// configure runs Configure on a fresh plugin with a quiet logger and an
// empty sysfs (so an accepted config polls no real controller), and stops
// its poller when the test ends.
func configure(t *testing.T, raw map[string]any) (*plugin, error) {
	t.Helper()
	p := newPlugin()
	p.log = hclog.NewNullLogger()
	t.Cleanup(p.Close)
	return p, sdktest.Configure(t, p, raw, sdk.Paths{Sysfs: t.TempDir()})
}

// TestConfigureErrors: each bad setting is refused with a message that
// names its key and says what is wrong.
func TestConfigureErrors(t *testing.T) {
	for _, tc := range []struct {
		raw         map[string]any
		key, detail string
	}{
		{map[string]any{"smart_intervall": "5m"}, `"smart_intervall"`, "unknown field"},
		{map[string]any{"smart_interval": "1s"}, "smart_interval: ", "below the minimum"},
		{map[string]any{"smart_interval": "soon"}, "smart_interval: ", "invalid duration"},
		{map[string]any{"smart_interval": true}, "smart_interval: ", "neither a duration string"},
		{map[string]any{"smart_interval": -600}, "smart_interval: ", "below the minimum"},
		{map[string]any{"dev_dir": ""}, "dev_dir: ", "empty"},
		{map[string]any{"smart": "yes"}, "smart", "cannot unmarshal"},
	} {
		_, err := configure(t, tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%v: error %v, want mention of %q and %q", tc.raw, err, tc.key, tc.detail)
		}
	}
}

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	p, err := configure(t, map[string]any{"smart": true, "smart_interval": 600, "dev_dir": "/dev"})
	if err != nil {
		t.Fatalf("numeric seconds rejected: %v", err)
	}
	if iv := p.current().interval; iv != 10*time.Minute {
		t.Errorf("interval = %s", iv)
	}
	if p, err = configure(t, map[string]any{"smart_interval": "90s", "dev_dir": "/srv/dev"}); err != nil {
		t.Fatal(err)
	}
	if pl := p.current(); pl.interval != 90*time.Second || pl.devDir != "/srv/dev" {
		t.Errorf("poller interval %s dev_dir %s", pl.interval, pl.devDir)
	}
	if p, err = configure(t, nil); err != nil {
		t.Fatal(err)
	}
	if pl := p.current(); pl.interval != defaultSMARTInterval || pl.devDir != defaultDevDir {
		t.Errorf("defaults: interval %s dev_dir %s", pl.interval, pl.devDir)
	}
	if p, err = configure(t, map[string]any{"smart": false}); err != nil || p.current() != nil {
		t.Errorf("smart: false: err %v, poller %v", err, p.current())
	}
}

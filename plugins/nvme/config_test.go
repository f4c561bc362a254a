package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// quietPlugin is a fresh plugin with a quiet logger whose poller stops
// when the test ends.
func quietPlugin(t *testing.T) *plugin {
	p := newPlugin()
	p.log = slog.New(slog.DiscardHandler)
	t.Cleanup(func() { p.Close() })
	return p
}

// configure runs Configure on a quietPlugin with an empty sysfs (so an
// accepted config polls no real controller).
func configure(t *testing.T, raw map[string]any) (*plugin, error) {
	t.Helper()
	p := quietPlugin(t)
	return p, sdktest.Configure(t, p, raw, sdk.Paths{Sysfs: t.TempDir()})
}

// TestConfigureErrors: each bad setting is refused with a message that
// names its key and says what is wrong.
func TestConfigureErrors(t *testing.T) {
	sdktest.Refuses(t, func() *plugin { return quietPlugin(t) }, sdk.Paths{Sysfs: t.TempDir()}, []sdktest.Refusal{
		{Raw: map[string]any{"smart_intervall": "5m"}, Key: "smart_intervall", Detail: "unknown key"},
		{Raw: map[string]any{"smart_interval": "1s"}, Key: "smart_interval: ", Detail: "below the minimum"},
		{Raw: map[string]any{"smart_interval": "soon"}, Key: "smart_interval: ", Detail: "invalid duration"},
		{Raw: map[string]any{"smart_interval": true}, Key: "smart_interval: ", Detail: "neither a duration string"},
		{Raw: map[string]any{"smart_interval": -600}, Key: "smart_interval: ", Detail: "below the minimum"},
		{Raw: map[string]any{"dev_dir": ""}, Key: "dev_dir: ", Detail: "empty"},
		{Raw: map[string]any{"smart": "yes"}, Key: "smart", Detail: ": got "},
	})
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

// TestCrusoePrefixRefused: metric_prefix crusoe_vm_ would give
// nvme_collection_errors_total the Crusoe exporter's name for a per-scrape
// gauge; the plugin refuses it, naming the key, the family and the rules
// file. Another prefix is fine.
func TestCrusoePrefixRefused(t *testing.T) {
	for prefix, refused := range map[string]bool{"crusoe_vm_": true, "node_": false, "": false} {
		p := newPlugin()
		cfg := sdktest.Config(t, map[string]any{"smart": false}, sdk.Paths{Sysfs: t.TempDir()})
		cfg.MetricPrefix = prefix
		err := p.Configure(context.Background(), cfg)
		_ = p.Close()
		if refused != (err != nil) {
			t.Errorf("prefix %q: err = %v, refused want %v", prefix, err, refused)
			continue
		}
		if refused && (!strings.HasPrefix(err.Error(), "metric_prefix: ") || !strings.Contains(err.Error(), "crusoe_vm_nvme_collection_errors_total") || !strings.Contains(err.Error(), "plexporter-nvme.rules.yml")) {
			t.Errorf("prefix %q: error %q does not name the key, the Crusoe name and the rules", prefix, err)
		}
	}
}

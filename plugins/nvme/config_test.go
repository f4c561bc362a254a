package main

import (
	"log/slog"
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

// TestCrusoePrefixAccepted: metric_prefix crusoe_vm_ is accepted (it
// was refused, so the Crusoe names the prefix gives were unreachable), and
// nvme_collection_errors_total, which would carry the Crusoe exporter's
// name of a per-scrape gauge, is left out under it; any other prefix keeps
// every family.
func TestCrusoePrefixAccepted(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	for _, prefix := range []string{"crusoe_vm_", "node_", ""} {
		res := sdktest.Run(t, testPlugin(t, fixtureFake(t)), sdktest.Options{Sysfs: root, MetricPrefix: prefix, Config: map[string]any{"smart": false}})
		text := res.Text(t)
		sdktest.Contains(t, text, prefix+"nvme_info{", prefix+`nvme_smart_available{device="nvme0"} 0`)
		if prefix == "crusoe_vm_" {
			sdktest.Lacks(t, text, "crusoe_vm_nvme_collection_errors_total")
		} else {
			sdktest.Contains(t, text, prefix+`nvme_collection_errors_total{collector="smart"} 0`)
		}
	}
}

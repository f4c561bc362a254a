package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestConfig(t *testing.T) {
	root := procRoot(t, "mountstats-mixed", "tcp-synthetic", "tcp6-synthetic")
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root, Config: map[string]any{
		"operations":      []any{"READ", "setattr"},
		"volume_id_regex": `^/(?P<volume_id>[^/]+)`,
	}})
	text := res.Text(t)
	mustContain(t, text,
		`nfs_rpc_count_total{volume_id="export",nfs_operation="setattr"} 211093`,
		`nfs_rpc_count_total{volume_id="vol",nfs_operation="read"} 4.8211903e+07`)
	sdktest.Lacks(t, text, `nfs_operation="getattr"`)
}

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table
// and checks where each one lands.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	dir := t.TempDir()
	ms := filepath.Join(dir, "1", "mountstats")
	p := newPlugin()
	err := sdktest.Configure(t, p, map[string]any{
		"mountstats_path": ms,
		"net_dir":         filepath.Join(dir, "net"),
		"volume_id_regex": `^/(?P<volume_id>[^/]+)`,
		"operations":      []any{" Read", "READ", "commit"},
		"server_port":     20049,
	}, sdk.Paths{})
	if err != nil {
		t.Fatal(err)
	}
	if p.mountstats != ms || p.netDir != filepath.Join(dir, "net") || p.port != 20049 ||
		strings.Join(p.ops, ",") != "read,commit" || p.namer.Name("/vol/x") != "vol" {
		t.Errorf("configured %+v", p)
	}

	// The defaults: mountstats under the host's procfs, net/ next to it.
	p = newPlugin()
	if err := sdktest.Configure(t, p, nil, sdk.Paths{Procfs: "/host/proc"}); err != nil {
		t.Fatal(err)
	}
	if p.mountstats != "/host/proc/self/mountstats" || p.netDir != "/host/proc/self/net" || p.port != 2049 ||
		strings.Join(p.ops, ",") != strings.Join(defaultOperations, ",") {
		t.Errorf("defaults %+v", p)
	}
}

// TestConfigureRejects: each bad setting is refused with a message that
// names its key.
func TestConfigureRejects(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"volume_id_regex": "("}, Key: "volume_id_regex", Detail: "missing closing )"},
		{Raw: map[string]any{"server_port": 70000}, Key: "server_port", Detail: "70000 is not a port"},
		{Raw: map[string]any{"operations": []any{""}}, Key: "operations[0]", Detail: "empty operation name"},
		{Raw: map[string]any{"operations": []any{"read", " "}}, Key: "operations[1]", Detail: "empty operation name"},
		{Raw: map[string]any{"unknown_key": 1}, Key: "unknown_key", Detail: "unknown key"},
		{Raw: map[string]any{"operations": "read"}, Key: "operations", Detail: ": got "},
	})
	if err := sdktest.Configure(t, newPlugin(), map[string]any{"server_port": 0}, sdk.Paths{}); err == nil ||
		!strings.HasPrefix(err.Error(), "server_port: ") {
		t.Errorf("server_port 0: %v", err)
	}
}

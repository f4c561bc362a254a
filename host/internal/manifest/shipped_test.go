package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shipped parses a shipped plugin's manifest, plugins/<name>/plexporter-<name>.yaml.
func shipped(t *testing.T, name string) *Manifest {
	t.Helper()
	path := filepath.Join("..", "..", "..", "plugins", name, "plexporter-"+name+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGuestManifestGrantsNoNetwork: guest reads local kernel sources only
// (its active probes are the probe plugin's), so its sandbox has no network
// grant of any kind, and neither the CA certificates the HTTPS probes read.
func TestGuestManifestGrantsNoNetwork(t *testing.T) {
	m := shipped(t, "guest")
	if m.Network != nil {
		t.Errorf("plexporter-guest.yaml grants network %+v; guest needs none (the probes are plugins/probe's)", *m.Network)
	}
	for _, p := range slices.Concat(m.Paths.ReadOnly, m.Paths.ReadWrite) {
		if strings.HasPrefix(p, "/etc/") {
			t.Errorf("plexporter-guest.yaml grants %s; guest reads no CA certificates or other /etc file (the HTTPS probes are plugins/probe's)", p)
		}
	}
}

// TestProbeManifest: the probe plugin's sandbox as shipped grants the
// mount table and the CA certificates, no capability, and no network: that
// is the operator's grant (plugins/probe/README.md, The sandbox), since a
// network.inet grant is refused on kernels whose Landlock cannot restrict
// TCP ports.
func TestProbeManifest(t *testing.T) {
	m := shipped(t, "probe")
	if m.Network != nil || len(m.Capabilities) != 0 || len(m.Paths.Devices) != 0 || len(m.Paths.ReadWrite) != 0 {
		t.Errorf("plexporter-probe.yaml: %+v", m)
	}
	for _, want := range []string{"{procfs}/self/mountinfo", "/etc/ssl/certs", "/etc/pki"} {
		if !slices.Contains(m.Paths.ReadOnly, want) {
			t.Errorf("plexporter-probe.yaml does not grant %s read-only (%v)", want, m.Paths.ReadOnly)
		}
	}
}

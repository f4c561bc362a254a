package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/dev/demo/demotree"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// The rules that judge samples are skipped for a plugin that sends none;
// on the demo node (make demo: every shipped plugin's fixtures in one tree,
// the demo builds replaying the captured ioctl and netlink answers) the
// shipped plugins send their real families, and every rule judges them.
func TestShippedPluginsConformWithData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the demo plugins")
	}
	dir, err := os.MkdirTemp(runtimeRoot, "demo")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	tree, err := demotree.Build("../../..", filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "plexporter.yml")
	if err := os.WriteFile(config, []byte(tree.Config("")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := buildPlugins(dir, []string{"demo"}, shipped...); err != nil {
		t.Fatal(err)
	}
	// As root the shipped plugins run in their manifests' sandbox, which
	// this test binary launches itself: built with cgo (go test's default
	// where gcc is installed) it cannot (sandbox.CheckHost), and the
	// plugins run unconfined instead, as TestShippedPluginsConform does;
	// what this test is about, the rules that judge samples, holds either way.
	mode := SandboxAuto
	if os.Geteuid() == 0 {
		if err := sandbox.CheckHost(); err != nil {
			t.Logf("sandboxed runs skipped: %v", err)
			mode = SandboxOff
		}
	}
	dataRules := []string{"collect.guard", "collect.duplicates", "collect.catalogue", "allowlist.one", "allowlist.none", "metric-prefix"}
	for _, p := range shipped {
		t.Run(p, func(t *testing.T) {
			binary := filepath.Join(dir, "plexporter-"+p)
			rep := check(t, binary, config, mode, func(s *supervise.Settings) {
				s.Paths = &pluginv1.Paths{Sysfs: tree.Sysfs, Procfs: tree.Procfs, Rootfs: "/"}
			})
			out := text(rep)
			if !rep.OK() {
				t.Fatalf("does not conform on the demo node:\n%s", out)
			}
			for _, rule := range dataRules {
				if r, _ := rep.Result(rule); r.Status != Pass {
					t.Errorf("%s on the demo node: %s %s", rule, r.Status, r.Detail)
				}
			}
			t.Logf("\n%s", out)
		})
	}
}

// Package demotest runs the demo (make demo) inside a test: the host and
// the demo builds of every shipped plugin, with their manifests, over the
// node of package demotree. The dashboard and demo tests scrape it.
package demotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/dev/demo/demotree"
	"github.com/plexporter/plexporter/internal/testkit/hosttest"
)

// Host is a running demo host.
type Host struct {
	*hosttest.Host
	Plugins []string
	Tree    demotree.Tree
}

// Start builds the host and the demo plugins from the module at repo,
// lays the node out, starts the host as make demo does (each plugin in its
// manifest's sandbox when the test runs as root) and waits until it is
// ready. The host stops when the test ends.
func Start(t testing.TB, repo string) *Host {
	t.Helper()
	repo, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	dir := hosttest.TrustedDir(t, "plexporter-demo", "plugins", "collectors")
	plugins := filepath.Join(dir, "plugins")
	// The example C collector, built as make collectors builds it, for
	// the so plugin to load.
	library := filepath.Join(dir, "collectors", "libplexporter_loadavg.so")
	cc := exec.Command("cc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-I"+filepath.Join(repo, "sdk", "cabi"), "-o", library, filepath.Join(repo, "sdk", "cabi", "examples", "loadavg.c"))
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building the example C collector: %v\n%s", err, out)
	}
	if err := os.Chmod(library, 0o644); err != nil {
		t.Fatal(err)
	}
	cgo, err := os.ReadFile(filepath.Join(repo, "deploy", "cgo-plugins"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Host{}
	bins := []hosttest.Binary{{Pkg: "./host", Dir: repo, Out: filepath.Join(dir, "plexporter")}}
	mains, _ := filepath.Glob(filepath.Join(repo, "plugins", "*", "main.go"))
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		h.Plugins = append(h.Plugins, name)
		bins = append(bins, hosttest.Binary{Pkg: "./plugins/" + name, Dir: repo, Out: filepath.Join(plugins, "plexporter-"+name), Flags: []string{"-tags", "demo"}, Cgo: cgoPlugin(cgo, name)})
		hosttest.InstallManifest(t, plugins, filepath.Join(repo, "plugins", name, "plexporter-"+name+".yaml"), "")
	}
	if len(h.Plugins) == 0 {
		t.Fatalf("no plugins under %s/plugins", repo)
	}
	hosttest.Build(t, bins...)
	if h.Tree, err = demotree.Build(repo, filepath.Join(dir, "node")); err != nil {
		t.Fatal(err)
	}
	h.Host = hosttest.Start(t, hosttest.Options{
		Binary:    filepath.Join(dir, "plexporter"),
		PluginDir: plugins,
		Config:    h.Tree.Config(library),
		Args:      []string{"--path.sysfs=" + h.Tree.Sysfs, "--path.procfs=" + h.Tree.Procfs},
	})
	return h
}

// cgoPlugin tells whether deploy/cgo-plugins (list) names the plugin: it
// is built with cgo, as make build and make demo build it.
func cgoPlugin(list []byte, name string) bool {
	for _, line := range strings.Split(string(list), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if strings.TrimSpace(line) == name {
			return true
		}
	}
	return false
}

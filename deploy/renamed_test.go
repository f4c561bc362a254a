package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRenamedPluginPackageReplacesTheFormer installs, with the real dpkg
// into a throw-away root (--root: its own database and file tree, nothing
// of this machine's), a package under a plugin's former name laid out as
// deploy/nfpm/plugin.yaml lays one out, then the renamed plugin's package
// from `make package`: dpkg removes the former package on its own (the new
// one conflicts with and replaces it), its binary and manifest are gone
// from the plugin directory, and the new ones are in place. Dependencies
// are not installed (--force-depends): the host's package would run its
// maintainer scripts in that root.
func TestRenamedPluginPackageReplacesTheFormer(t *testing.T) {
	needTools(t, "dpkg", "dpkg-deb", "dpkg-query")
	renamed := renamedPlugins(t)
	if len(renamed) == 0 {
		t.Skip("deploy/renamed-plugins lists no renamed plugin")
	}
	b := packages(t)
	for name, formers := range renamed {
		for _, former := range formers {
			t.Run(former+"→"+name, func(t *testing.T) {
				deb, ok := b.Debs["plexporter-plugin-"+name]
				if !ok {
					t.Fatalf("make package made no plexporter-plugin-%s", name)
				}
				root := t.TempDir()
				for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
					must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
				}
				must(t, os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644))
				dir := "/usr/lib/plexporter/plugins/"

				dpkg(t, root, "-i", formerPackage(t, former))
				if got := dpkgStatus(t, root, "plexporter-plugin-"+former); got != "install ok installed" {
					t.Fatalf("plexporter-plugin-%s: dpkg status %q after installing it", former, got)
				}
				out := dpkg(t, root, "-i", deb)
				for pkg, want := range map[string]string{
					"plexporter-plugin-" + former: "",
					"plexporter-plugin-" + name:   "install ok installed",
				} {
					if got := dpkgStatus(t, root, pkg); got != want && !(want == "" && strings.Contains(got, "not-installed")) {
						t.Errorf("%s: dpkg status %q after installing plexporter-plugin-%s, want %q\n%s", pkg, got, name, want, out)
					}
				}
				for _, f := range []string{"plexporter-" + former, "plexporter-" + former + ".yaml"} {
					if _, err := os.Lstat(filepath.Join(root, dir, f)); !os.IsNotExist(err) {
						t.Errorf("%s%s is left after the upgrade (%v)", dir, f, err)
					}
				}
				for _, f := range []string{"plexporter-" + name, "plexporter-" + name + ".yaml"} {
					if _, err := os.Stat(filepath.Join(root, dir, f)); err != nil {
						t.Errorf("%s%s after the upgrade: %v", dir, f, err)
					}
				}
			})
		}
	}
}

// formerPackage builds plexporter-plugin-<former> as the former name's
// package was: the binary and manifest in the packaged plugin directory,
// its documentation, a dependency on the host; an older version than any
// the repository makes.
func formerPackage(t *testing.T, former string) string {
	t.Helper()
	tree := t.TempDir()
	pkg := "plexporter-plugin-" + former
	files := map[string]string{
		"usr/lib/plexporter/plugins/plexporter-" + former:           "#!/bin/sh\n",
		"usr/lib/plexporter/plugins/plexporter-" + former + ".yaml": "capabilities: []\n",
		"usr/share/doc/" + pkg + "/README.md":                       "# plexporter-" + former + "\n",
	}
	for path, content := range files {
		must(t, os.MkdirAll(filepath.Join(tree, filepath.Dir(path)), 0o755))
		must(t, os.WriteFile(filepath.Join(tree, path), []byte(content), 0o644))
	}
	must(t, os.Chmod(filepath.Join(tree, "usr/lib/plexporter/plugins/plexporter-"+former), 0o755))
	must(t, os.MkdirAll(filepath.Join(tree, "DEBIAN"), 0o755))
	control := fmt.Sprintf("Package: %s\nVersion: 0.0.1\nArchitecture: %s\nMaintainer: plexporter developers <noreply@plexporter.invalid>\nDepends: plexporter (>= 0.0.1)\nSection: net\nPriority: optional\nDescription: plexporter plugin: %s\n the plugin before its rename\n", pkg, runtime.GOARCH, former)
	must(t, os.WriteFile(filepath.Join(tree, "DEBIAN", "control"), []byte(control), 0o644))
	deb := filepath.Join(t.TempDir(), pkg+".deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", tree, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

// dpkg runs dpkg on the throw-away root and returns its output.
func dpkg(t *testing.T, root string, args ...string) string {
	t.Helper()
	args = append([]string{"--root=" + root, "--force-depends", "--force-not-root", "--force-script-chrootless", "--log=/dev/null"}, args...)
	out, err := exec.Command("dpkg", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func dpkgStatus(t *testing.T, root, pkg string) string {
	t.Helper()
	out, _ := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Status}", pkg).Output()
	return strings.TrimSpace(string(out))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package deploy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The host's default --plugin.dir values, which the host package creates.
var pluginDirs = []string{"/usr/lib/plexporter/plugins", "/etc/plexporter/plugins.d"}

var debVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

// checkOwnership fails for any entry not owned by root:root or writable by
// group or others: the host refuses plugins (and their manifests and
// directories) that anyone but root could swap.
func checkOwnership(t *testing.T, pkg string, files map[string]entry) {
	t.Helper()
	for path, e := range files {
		if e.Owner != "root/root" {
			t.Errorf("%s: %s is owned by %s, want root/root", pkg, path, e.Owner)
		}
		if e.Mode[0] != 'l' && (e.Mode[5] == 'w' || e.Mode[8] == 'w') {
			t.Errorf("%s: %s has mode %s, writable by group or others", pkg, path, e.Mode)
		}
	}
}

// checkFiles fails unless files holds exactly the regular files in want
// (path → mode) besides directories.
func checkFiles(t *testing.T, pkg string, files map[string]entry, want map[string]string) {
	t.Helper()
	for path, mode := range want {
		e, ok := files[path]
		switch {
		case !ok:
			t.Errorf("%s: %s missing", pkg, path)
		case e.Mode != mode:
			t.Errorf("%s: %s has mode %s, want %s", pkg, path, e.Mode, mode)
		}
	}
	for path, e := range files {
		if _, ok := want[path]; !ok && e.Mode[0] != 'd' {
			t.Errorf("%s: unexpected file %s", pkg, path)
		}
	}
}

func conffiles(t *testing.T, control string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(control, "conffiles"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func TestHostPackage(t *testing.T) {
	b := packages(t)
	root := repoRoot(t)
	deb, ok := b.Debs["plexporter"]
	if !ok {
		t.Fatalf("make package made no plexporter package; it made %v", b.Debs)
	}
	for name, want := range map[string]string{
		"Architecture": runtime.GOARCH,
		"Depends":      "systemd-sysusers | adduser",
	} {
		if got, err := field(deb, name); err != nil || got != want {
			t.Errorf("%s: %s is %q (%v), want %q", deb, name, got, err, want)
		}
	}
	if v, _ := field(deb, "Version"); !debVersion.MatchString(v) {
		t.Errorf("%s: Version %q is not a Debian version", deb, v)
	}

	files := contents(t, deb)
	checkOwnership(t, "plexporter", files)
	want := map[string]string{
		"/usr/bin/plexporter":                        "-rwxr-xr-x",
		"/usr/lib/systemd/system/plexporter.service": "-rw-r--r--",
		"/usr/lib/sysusers.d/plexporter.conf":        "-rw-r--r--",
		"/etc/plexporter/plexporter.yml":             "-rw-r--r--",
		"/etc/default/plexporter":                    "-rw-r--r--",
		"/usr/share/doc/plexporter/sbom.cdx.json":    "-rw-r--r--",
		"/usr/share/doc/plexporter/copyright":        "-rw-r--r--",
	}
	roles, _ := filepath.Glob(filepath.Join(root, "deploy", "roles", "*", "*"))
	if len(roles) == 0 {
		t.Fatal("no role examples under deploy/roles")
	}
	for _, r := range roles {
		rel, _ := filepath.Rel(filepath.Join(root, "deploy", "roles"), r)
		want["/usr/share/doc/plexporter/roles/"+rel] = "-rw-r--r--"
	}
	checkFiles(t, "plexporter", files, want)
	for _, dir := range append([]string{"/etc/plexporter"}, pluginDirs...) {
		if e := files[dir]; e.Mode != "drwxr-xr-x" {
			t.Errorf("plexporter: directory %s is %q, want drwxr-xr-x", dir, e.Mode)
		}
	}

	fs, control := extract(t, deb)
	if got, want := conffiles(t, control), []string{"/etc/default/plexporter", "/etc/plexporter/plexporter.yml"}; !slices.Equal(got, want) {
		t.Errorf("conffiles are %v, want %v", got, want)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		path := filepath.Join(control, script)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("maintainer script %s: %v (mode %v), want mode 0755", script, err, fi.Mode())
			continue
		}
		sameFile(t, path, filepath.Join(root, "deploy", "debian", script))
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", script, err, out)
		}
	}
	for dst, src := range map[string]string{
		"usr/lib/systemd/system/plexporter.service": "deploy/systemd/plexporter.service",
		"usr/lib/sysusers.d/plexporter.conf":        "deploy/systemd/plexporter.sysusers",
		"etc/plexporter/plexporter.yml":             "deploy/etc/plexporter.yml",
		"etc/default/plexporter":                    "deploy/etc/default-plexporter",
	} {
		sameFile(t, filepath.Join(fs, dst), filepath.Join(root, src))
	}
	checkCopyright(t, filepath.Join(fs, "usr/share/doc/plexporter/copyright"))
	host := filepath.Join(fs, "usr/bin/plexporter")
	checkStatic(t, host)
	checkSBOM(t, filepath.Join(fs, "usr/share/doc/plexporter/sbom.cdx.json"), host)
	sameFile(t, filepath.Join(fs, "usr/share/doc/plexporter/sbom.cdx.json"), strings.TrimSuffix(deb, ".deb")+".cdx.json")

	// The directories the package makes are the ones the host looks in.
	if got := defaultPluginDirs(t, host); !slices.Equal(got, pluginDirs) {
		t.Errorf("the packaged host's default plugin directories are %v; the package makes %v", got, pluginDirs)
	}
}

// defaultPluginDirs starts host without --plugin.dir and reads the
// directories it announces.
func defaultPluginDirs(t *testing.T, host string) []string {
	t.Helper()
	cmd := exec.Command(host, "--web.listen-address=127.0.0.1:0", "--no-plugin.sandbox", "--log.format=logfmt", "--plugin.runtime-dir="+t.TempDir())
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM)
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, v, ok := strings.Cut(sc.Text(), "plugin_dirs="); ok {
				found <- strings.Split(strings.Trim(strings.Fields(v)[0], `"`), ",")
				return
			}
		}
		close(found)
	}()
	select {
	case dirs := <-found:
		return dirs
	case <-time.After(time.Minute): // generous: a loaded machine starts slowly
		t.Fatal("the packaged host logged no plugin_dirs within a minute")
	}
	return nil
}

func TestPluginPackages(t *testing.T) {
	b := packages(t)
	root := repoRoot(t)
	version, _ := field(b.Debs["plexporter"], "Version")
	names := []string{"plexporter"}
	cgo := cgoPlugins(t)
	renamed := renamedPlugins(t)
	for _, p := range shipped(t) {
		pkg := "plexporter-plugin-" + p
		depends := "plexporter (>= " + version + ")"
		if cgo[p] {
			depends = "libc6, " + depends // nfpm writes them sorted
		}
		var formers []string
		for _, f := range renamed[p] {
			formers = append(formers, "plexporter-plugin-"+f)
		}
		former := strings.Join(formers, ", ") // empty: no such field
		names = append(names, pkg)
		deb, ok := b.Debs[pkg]
		if !ok {
			t.Errorf("no package %s for plugins/%s", pkg, p)
			continue
		}
		for name, want := range map[string]string{
			"Architecture": runtime.GOARCH,
			"Version":      version,
			"Depends":      depends,
			"Conflicts":    former,
			"Replaces":     former,
			"Provides":     former,
		} {
			if got, err := field(deb, name); err != nil || got != want {
				t.Errorf("%s: %s is %q (%v), want %q", pkg, name, got, err, want)
			}
		}
		files := contents(t, deb)
		checkOwnership(t, pkg, files)
		bin := "/usr/lib/plexporter/plugins/plexporter-" + p
		want := map[string]string{
			bin:                                    "-rwxr-xr-x",
			bin + ".yaml":                          "-rw-r--r--",
			"/usr/share/doc/" + pkg + "/README.md": "-rw-r--r--",
			"/usr/share/doc/" + pkg + "/sbom.cdx.json": "-rw-r--r--",
			"/usr/share/doc/" + pkg + "/copyright":     "-rw-r--r--",
		}
		if p == "textfile" {
			// Its default directory: readable, writable by root alone.
			want["/var/lib/plexporter/textfile"] = "drwxr-xr-x"
		}
		checkFiles(t, pkg, files, want)
		fs, control := extract(t, deb)
		if c := conffiles(t, control); len(c) > 0 {
			t.Errorf("%s has conffiles %v; a manifest is the plugin's, operators override it in the config file", pkg, c)
		}
		sameFile(t, filepath.Join(fs, bin+".yaml"), filepath.Join(root, "plugins", p, "plexporter-"+p+".yaml"))
		if cgo[p] {
			checkDynamic(t, filepath.Join(fs, bin))
		} else {
			checkStatic(t, filepath.Join(fs, bin))
		}
		checkSBOM(t, filepath.Join(fs, "usr/share/doc", pkg, "sbom.cdx.json"), filepath.Join(fs, bin))
		checkCopyright(t, filepath.Join(fs, "usr/share/doc", pkg, "copyright"))
	}
	var made []string
	for name := range b.Debs {
		made = append(made, name)
	}
	slices.Sort(made)
	slices.Sort(names)
	if !slices.Equal(made, names) {
		t.Errorf("make package made %v, want %v", made, names)
	}
	checkSums(t, b.Out)
}

// checkSums verifies SHA256SUMS against every .deb and SBOM in dir.
func checkSums(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		listed[name] = sum
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.*"))
	for _, f := range files {
		if filepath.Base(f) == "SHA256SUMS" {
			continue
		}
		if got := fileSHA256(t, f); listed[filepath.Base(f)] != got {
			t.Errorf("SHA256SUMS lists %s as %q, it is %s", filepath.Base(f), listed[filepath.Base(f)], got)
		}
	}
}

func fileSHA256(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

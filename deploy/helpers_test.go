package deploy

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository: the parent of this package's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// needTools skips the test when a tool it drives is missing (a developer
// machine without Debian's dpkg); CI installs them all.
func needTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (CI has it): %v", tool, err)
		}
	}
}

// shipped lists the plugins the repository ships: plugins/<name>/main.go.
func shipped(t testing.TB) []string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(repoRoot(t), "plugins", "*", "main.go"))
	if err != nil || len(mains) == 0 {
		t.Fatalf("no plugins/*/main.go: %v", err)
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	sort.Strings(names)
	return names
}

// cgoPlugins are the plugins deploy/cgo-plugins lists: built with cgo,
// dynamically linked against libc, so their packages depend on libc6 and
// the FROM-scratch image leaves them out.
func cgoPlugins(t testing.TB) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "cgo-plugins"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, _, _ := strings.Cut(line, "#"); strings.TrimSpace(name) != "" {
			out[strings.TrimSpace(name)] = true
		}
	}
	return out
}

// renamedPlugins are deploy/renamed-plugins: a shipped plugin's name →
// its former names, whose packages its package replaces.
func renamedPlugins(t testing.TB) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "renamed-plugins"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			t.Fatalf("deploy/renamed-plugins: %q is not \"<name> <former name>\"", line)
		}
		out[f[0]] = append(out[f[0]], f[1])
	}
	return out
}

// staticPlugins are the shipped plugins that are not cgo plugins: the
// ones in the container image.
func staticPlugins(t testing.TB) []string {
	t.Helper()
	cgo := cgoPlugins(t)
	var out []string
	for _, p := range shipped(t) {
		if !cgo[p] {
			out = append(out, p)
		}
	}
	return out
}

// checkDynamic fails unless path is linked against libc through the
// system's dynamic loader (a cgo plugin).
func checkDynamic(t testing.TB, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: not an ELF file: %v", path, err)
		return
	}
	defer f.Close()
	if libs, _ := f.ImportedLibraries(); !slices.Contains(libs, "libc.so.6") {
		t.Errorf("%s imports %v, want libc.so.6 (a cgo plugin)", path, libs)
	}
}

// sharedDirs are removed after all tests (TestMain).
var sharedDirs []string

func sharedTempDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	// Traversable by the plugins' user: the install and role tests run
	// the built plugins sandboxed from here.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sharedDirs = append(sharedDirs, dir)
	return dir
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == unitSandboxArg {
		unitSandbox(os.Args[2:]) // re-executed by startAsUnit; never returns
	}
	code := m.Run()
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// build is one run of `make package`.
type build struct {
	Out  string            // PKG_OUT: the .debs, SBOMs and SHA256SUMS
	Bin  string            // the binaries that went into them
	Debs map[string]string // package name → .deb
	Log  string
}

var (
	packagesOnce sync.Once
	packagesRun  *build
	packagesErr  error
)

// packages runs `make package` in the repository once per test binary
// (into a temporary directory) and returns what it made.
func packages(t testing.TB) *build {
	t.Helper()
	needTools(t, "make", "dpkg-deb")
	packagesOnce.Do(func() {
		dir := sharedTempDir(t, "plexporter-packages-")
		packagesRun, packagesErr = makePackage(repoRoot(t), dir, nil, nil)
	})
	if packagesErr != nil {
		t.Fatal(packagesErr)
	}
	return packagesRun
}

// makePackage runs `make package` in root with its output under dir, the
// make variables vars and the extra environment env.
func makePackage(root, dir string, vars, env []string) (*build, error) {
	b := &build{Out: filepath.Join(dir, "out"), Bin: filepath.Join(dir, "build", "bin"), Debs: map[string]string{}}
	cmd := exec.Command("make", append([]string{"-C", root, "package"}, vars...)...)
	cmd.Env = append(os.Environ(), "PKG_OUT="+b.Out, "PKG_BUILD="+filepath.Join(dir, "build"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	b.Log = string(out)
	if err != nil {
		return nil, fmt.Errorf("make package in %s: %v\n%s", root, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(b.Out, "*.deb"))
	for _, deb := range debs {
		name, err := field(deb, "Package")
		if err != nil {
			return nil, err
		}
		b.Debs[name] = deb
	}
	return b, nil
}

// field is one control field of a .deb.
func field(deb, name string) (string, error) {
	out, err := exec.Command("dpkg-deb", "--field", deb, name).Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-deb --field %s %s: %v", deb, name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// entry is one line of `dpkg-deb --contents`.
type entry struct {
	Mode  string // ls-style: drwxr-xr-x, -rw-r--r--, lrwxrwxrwx
	Owner string // user/group
	Size  int64
	Link  string // symlink target
}

// contents lists a .deb's files by absolute path ("/usr/bin/plexporter").
func contents(t testing.TB, deb string) map[string]entry {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents %s: %v", deb, err)
	}
	files := map[string]entry{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// drwxr-xr-x root/root         0 2026-12-01 09:58 ./etc/
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			t.Fatalf("%s: unexpected dpkg-deb --contents line %q", deb, sc.Text())
		}
		size, _ := strconv.ParseInt(f[2], 10, 64)
		e := entry{Mode: f[0], Owner: f[1], Size: size}
		path := f[5]
		if len(f) >= 8 && f[6] == "->" {
			e.Link = f[7]
		}
		path = strings.TrimSuffix(strings.TrimPrefix(path, "."), "/")
		if path == "" {
			path = "/"
		}
		files[path] = e
	}
	return files
}

// extract unpacks a .deb's files and its control archive.
func extract(t testing.TB, deb string) (root, control string) {
	t.Helper()
	dir := t.TempDir()
	root, control = filepath.Join(dir, "root"), filepath.Join(dir, "DEBIAN")
	for _, args := range [][]string{{"-x", deb, root}, {"--control", deb, control}} {
		if out, err := exec.Command("dpkg-deb", args...).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb %v: %v\n%s", args, err, out)
		}
	}
	return root, control
}

// checkStatic fails unless path is a statically linked ELF executable: no
// program interpreter, no shared libraries. The sandbox grants plugins no
// loader or libc, and the image has none.
func checkStatic(t testing.TB, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: not an ELF file: %v", path, err)
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (has a program interpreter)", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", path, libs)
	}
}

// checkSBOM fails unless sbomPath is the CycloneDX SBOM of binary: its main
// component is this module, and every module the binary was built from is
// listed with the version its build information records.
func checkSBOM(t testing.TB, sbomPath, binary string) {
	t.Helper()
	data, err := os.ReadFile(sbomPath)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Serial    string `json:"serialNumber"`
		Metadata  struct {
			Timestamp string `json:"timestamp"`
			Component struct {
				Name     string `json:"name"`
				Licenses []struct {
					License struct {
						ID string `json:"id"`
					} `json:"license"`
				} `json:"licenses"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("%s: %v", sbomPath, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/plexporter/plexporter" {
		t.Errorf("%s: bomFormat %q, main component %q; want a CycloneDX SBOM of github.com/plexporter/plexporter", sbomPath, bom.BOMFormat, bom.Metadata.Component.Name)
	}
	if l := bom.Metadata.Component.Licenses; len(l) != 1 || l[0].License.ID != "Apache-2.0" {
		t.Errorf("%s: the main component's licenses are %+v, want Apache-2.0 (LICENSE)", sbomPath, l)
	}
	if bom.Serial != "" || bom.Metadata.Timestamp != "" {
		t.Errorf("%s has a serial number or timestamp: the packages would not be reproducible", sbomPath)
	}
	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
	}
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatalf("%s: %v", binary, err)
	}
	if len(info.Deps) == 0 {
		t.Fatalf("%s records no modules", binary)
	}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		if v, ok := listed[d.Path]; !ok || v != d.Version {
			t.Errorf("%s: module %s %s of %s is listed as %q", sbomPath, d.Path, d.Version, filepath.Base(binary), v)
		}
	}
	if want := strings.TrimPrefix(info.GoVersion, "go"); listed["std"] != info.GoVersion && listed["std"] != want {
		t.Errorf("%s: the standard library is listed as %q, the binary was built with %s", sbomPath, listed["std"], info.GoVersion)
	}
}

// sameFile fails unless got has the bytes of the repository file want.
func sameFile(t testing.TB, got, want string) {
	t.Helper()
	a, err := os.ReadFile(got)
	if err != nil {
		t.Error(err)
		return
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Error(err)
		return
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s differs from %s", got, want)
	}
}

// checkCopyright checks a package's /usr/share/doc/<package>/copyright:
// Debian's machine-readable format (DEP-5), the project's license as in
// LICENSE, and the pointer to the SBOM for the modules linked in.
func checkCopyright(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	first, _, _ := strings.Cut(text, "\n")
	if first != "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Errorf("%s: first line %q is not the machine-readable format's Format field", path, first)
	}
	for _, want := range []string{"\nUpstream-Name: plexporter\n", "\nFiles: *\n", "\nLicense: Apache-2.0\n", "/usr/share/common-licenses/Apache-2.0", "sbom.cdx.json"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", path, want)
		}
	}
	license, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	if err != nil || !strings.Contains(string(license), "Apache License\n                           Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0 the copyright file names (%v)", err)
	}
}

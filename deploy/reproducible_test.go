package deploy

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackagesAreReproducible builds the packages a second time, from a
// copy of the repository's files (another path, fresh mtimes, no .git),
// from the same version and commit date, and requires output
// byte-identical to the packages the other tests check (built in the
// repository): every .deb, every SBOM, SHA256SUMS. Reusing that first
// build, rather than making a third from a second copy, saves a whole
// `make package` in every `make test`.
//
// The second build shares the build cache. That still catches a build
// that depends on where it runs: with -trimpath the compiler's cache keys
// leave the directory out, and without it (the regression this guards)
// they include it, so every package is compiled again in the copy and its
// path lands in the binaries; the link step, nfpm and the SBOMs run again
// either way. What a shared cache cannot catch is a compiler that writes
// the path although -trimpath asked it not to (a toolchain bug, cgo's C
// compiler included): PLEXPORTER_REPRO_COLD_CACHE=1 gives the second build
// an empty cache for that (about 5 minutes more on 2 cores: every package
// and the standard library compiled again), as a release check.
func TestPackagesAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every package a second time (-short)")
	}
	needTools(t, "make", "dpkg-deb")
	root := repoRoot(t)
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	// What `make package` takes from git, handed to the copies, which have
	// no history: the Makefile's variables, and package.sh's epoch.
	vars := []string{
		"VERSION=" + git("describe", "--tags", "--always", "--dirty"),
		"REVISION=" + git("rev-parse", "HEAD"),
		"TOOLS=" + filepath.Join(root, "bin", "tools"),
	}
	epoch := "SOURCE_DATE_EPOCH=" + git("log", "-1", "--format=%ct")
	// The copy first, at the moment vars and epoch were read: a commit made
	// while the first build runs must not end up in one build only.
	dir := t.TempDir()
	copy2 := filepath.Join(dir, "elsewhere", "a-longer-directory-name", "plexporter")
	copyTracked(t, root, copy2)
	first := packages(t) // in the repository, as make package runs there
	env := []string{epoch}
	if os.Getenv("PLEXPORTER_REPRO_COLD_CACHE") == "1" {
		env = append(env, "GOCACHE="+filepath.Join(dir, "gocache"))
	}
	second, err := makePackage(copy2, filepath.Join(dir, "pkg2"), vars, env)
	if err != nil {
		t.Fatal(err)
	}

	names := func(dir string) []string {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		var out []string
		for _, f := range files {
			out = append(out, filepath.Base(f))
		}
		return out
	}
	a, b := names(first.Out), names(second.Out)
	if strings.Join(a, " ") != strings.Join(b, " ") {
		t.Fatalf("the builds made different files:\n%v\n%v", a, b)
	}
	for _, name := range a {
		if x, y := fileSHA256(t, filepath.Join(first.Out, name)), fileSHA256(t, filepath.Join(second.Out, name)); x != y {
			t.Errorf("%s differs between the two builds: sha256 %s and %s (the copy has the tracked files only: an untracked file in the repository's packages would explain it)", name, x, y)
		}
	}
}

// copyTracked copies the files git tracks, as they are in the work tree,
// from src to dst, keeping their modes.
func copyTracked(t *testing.T, src, dst string) {
	t.Helper()
	out, err := exec.Command("git", "-C", src, "ls-files", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		from, to := filepath.Join(src, rel), filepath.Join(dst, rel)
		fi, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		in, err := os.Open(from)
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
		if err == nil {
			_, err = io.Copy(w, in)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

package trust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody owns what an attacker would: any uid but root's and the host's.
const nobody = 65534

var strict = Policy{Strict: true, Override: "--lax"}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root (CI runs as root)")
	}
}

// tree makes dir/<rel> directories with mode 0755 under a fresh temp dir
// (itself under root-owned sticky /tmp) and returns the temp dir.
func tree(t *testing.T, rels ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, r := range rels {
		p := filepath.Join(root, r)
		must(t, os.MkdirAll(p, 0o755))
		must(t, os.Chmod(p, 0o755))
	}
	return root
}

func file(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	must(t, os.WriteFile(path, []byte("user: nobody\n"), mode))
	must(t, os.Chmod(path, mode)) // past the umask
	return path
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// refused asserts err is an *Error about path that says fix.
func refused(t *testing.T, err error, kind, path, fix string) {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("want a trust error about %s %s, got %v", kind, path, err)
	}
	if te.Kind != kind || te.Path != path || !strings.Contains(err.Error(), "run "+fix+", or start the host with --lax") {
		t.Fatalf("want %s %s refused with %q, got %v", kind, path, fix, err)
	}
}

func TestTrustedFileIsRead(t *testing.T) {
	needRoot(t)
	root := tree(t, "etc")
	f := file(t, filepath.Join(root, "etc", "m.yaml"), 0o644)
	data, err := strict.ReadFile(f, 1<<20)
	if err != nil || string(data) != "user: nobody\n" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
}

func TestFileRules(t *testing.T) {
	needRoot(t)
	root := tree(t, "etc")
	f := file(t, filepath.Join(root, "etc", "m.yaml"), 0o666)
	_, err := strict.ReadFile(f, 1<<20)
	refused(t, err, "file", f, "chmod go-w "+f)
	if !strings.Contains(err.Error(), "mode 0666") || !strings.Contains(err.Error(), "owner uid 0 (root)") {
		t.Errorf("the message must show owner and mode: %v", err)
	}
	must(t, os.Chmod(f, 0o644))
	must(t, os.Chown(f, nobody, nobody))
	_, err = strict.ReadFile(f, 1<<20)
	refused(t, err, "file", f, "chown root "+f)

	bin := file(t, filepath.Join(root, "etc", "plexporter-x"), 0o775)
	_, _, err = strict.Executable(bin)
	refused(t, err, "file", bin, "chmod go-w "+bin)

	// Without Strict only the reading rules apply.
	if _, err := (Policy{}).ReadFile(f, 1<<20); err != nil {
		t.Errorf("non-strict read of another user's file: %v", err)
	}
	if _, _, err := (Policy{}).Executable(bin); err != nil {
		t.Errorf("non-strict group-writable executable: %v", err)
	}
}

func TestEveryDirectoryUpToTheRoot(t *testing.T) {
	needRoot(t)
	root := tree(t, "a/b/c")
	f := file(t, filepath.Join(root, "a/b/c/m.yaml"), 0o644)
	for _, dir := range []string{root, filepath.Join(root, "a"), filepath.Join(root, "a/b"), filepath.Join(root, "a/b/c")} {
		must(t, os.Chmod(dir, 0o777))
		_, err := strict.ReadFile(f, 1<<20)
		refused(t, err, "directory", dir, "chmod go-w "+dir)
		if !strings.Contains(err.Error(), "(on the way to "+f+")") {
			t.Errorf("the message must name the file checked: %v", err)
		}
		must(t, os.Chmod(dir, 0o755))

		must(t, os.Chown(dir, nobody, nobody))
		_, err = strict.ReadFile(f, 1<<20)
		refused(t, err, "directory", dir, "chown root "+dir)
		must(t, os.Chown(dir, 0, 0))
	}
	must(t, os.Chmod(filepath.Join(root, "a"), 0o775))
	_, err := strict.ReadFile(f, 1<<20)
	refused(t, err, "directory", filepath.Join(root, "a"), "chmod go-w "+filepath.Join(root, "a"))
	must(t, os.Chmod(filepath.Join(root, "a"), 0o755))
	if _, err := strict.ReadFile(f, 1<<20); err != nil {
		t.Fatalf("all fixed: %v", err)
	}
}

func TestStickyDirectories(t *testing.T) {
	needRoot(t)
	root := tree(t, "tmp/plugins")
	tmp := filepath.Join(root, "tmp")
	f := file(t, filepath.Join(tmp, "plugins", "m.yaml"), 0o644)
	must(t, os.Chmod(tmp, os.ModeSticky|0o777))
	if _, err := strict.ReadFile(f, 1<<20); err != nil {
		t.Fatalf("a root-owned sticky directory above is fine: %v", err)
	}
	must(t, os.Chown(tmp, nobody, nobody))
	_, err := strict.ReadFile(f, 1<<20)
	refused(t, err, "directory", tmp, "chown root "+tmp)

	// A symlink in a sticky directory can be replaced by its owner.
	must(t, os.Chown(tmp, 0, 0))
	link := filepath.Join(tmp, "m.yaml")
	must(t, os.Symlink(f, link))
	if _, err := strict.ReadFile(link, 1<<20); err != nil {
		t.Fatalf("root's symlink: %v", err)
	}
	must(t, os.Lchown(link, nobody, nobody))
	_, err = strict.ReadFile(link, 1<<20)
	refused(t, err, "symlink", link, "chown -h root "+link)

	// Sticky but not world-writable, and group-writable but not sticky.
	must(t, os.Chmod(tmp, os.ModeSticky|0o775))
	if _, err := strict.ReadFile(f, 1<<20); err != nil {
		t.Fatalf("root-owned sticky, group-writable: %v", err)
	}
	must(t, os.Chmod(tmp, 0o775))
	_, err = strict.ReadFile(f, 1<<20)
	refused(t, err, "directory", tmp, "chmod go-w "+tmp)
}

// A role directory enables a plugin by symlink, possibly through further
// links: every directory holding a link followed, and every directory on the
// way to the target, is a place where the target could be swapped.
func TestSymlinkedPaths(t *testing.T) {
	needRoot(t)
	root := tree(t, "role", "shipped", "middle", "real/lib")
	bin := file(t, filepath.Join(root, "shipped", "plexporter-x"), 0o755)
	must(t, os.Symlink(filepath.Join(root, "middle", "plexporter-x"), filepath.Join(root, "role", "plexporter-x")))
	must(t, os.Symlink("../shipped/plexporter-x", filepath.Join(root, "middle", "plexporter-x"))) // relative
	link := filepath.Join(root, "role", "plexporter-x")

	target, _, err := strict.Executable(link)
	if err != nil || target != bin {
		t.Fatalf("Executable = %s, %v; want %s", target, err, bin)
	}
	for _, dir := range []string{"role", "middle", "shipped"} {
		dir = filepath.Join(root, dir)
		must(t, os.Chmod(dir, 0o777))
		_, _, err := strict.Executable(link)
		refused(t, err, "directory", dir, "chmod go-w "+dir)
		must(t, os.Chmod(dir, 0o755))
	}

	// A directory reached through a symlink is checked where it is.
	must(t, os.Symlink(filepath.Join(root, "real", "lib"), filepath.Join(root, "shipped", "lib")))
	f := file(t, filepath.Join(root, "real", "lib", "m.yaml"), 0o644)
	via := filepath.Join(root, "shipped", "lib", "m.yaml")
	must(t, os.Chmod(filepath.Join(root, "real"), 0o777))
	_, err = strict.ReadFile(via, 1<<20)
	refused(t, err, "directory", filepath.Join(root, "real"), "chmod go-w "+filepath.Join(root, "real"))
	must(t, os.Chmod(filepath.Join(root, "real"), 0o755))
	if got, _, err := strict.Resolve(via); err != nil || got != f {
		t.Fatalf("Resolve(%s) = %s, %v; want %s", via, got, err, f)
	}
}

func TestResolveAgreesWithTheKernel(t *testing.T) {
	root := tree(t, "a/b", "c")
	file(t, filepath.Join(root, "c", "f"), 0o644)
	must(t, os.Symlink("../../c", filepath.Join(root, "a", "b", "up")))
	must(t, os.Symlink(root+"/a/./b/up/", filepath.Join(root, "abs")))
	for _, p := range []string{
		filepath.Join(root, "a/b/up/f"),
		filepath.Join(root, "abs/f"),
		root + "/a/b/up/../c/f",
		root + "/abs/../a/b",
		"/",
	} {
		want, err := filepath.EvalSymlinks(p)
		must(t, err)
		if got, _, err := (Policy{}).Resolve(p); err != nil || got != want {
			t.Errorf("Resolve(%s) = %s, %v; want %s", p, got, err, want)
		}
	}
	t.Chdir(filepath.Join(root, "a"))
	if got, _, err := (Policy{}).Resolve("b/up/../c/f"); err != nil || got != filepath.Join(root, "c/f") {
		t.Errorf("relative: %s, %v", got, err)
	}
}

func TestBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	dangling, loop := filepath.Join(dir, "plexporter-gone"), filepath.Join(dir, "plexporter-loop")
	must(t, os.Symlink(filepath.Join(dir, "nowhere", "bin"), dangling))
	must(t, os.Symlink("plexporter-loop2", loop))
	must(t, os.Symlink("plexporter-loop", filepath.Join(dir, "plexporter-loop2")))
	_, _, err := (Policy{}).Executable(dangling)
	if err == nil || !strings.Contains(err.Error(), "dangling symlink: "+dangling+" points to "+filepath.Join(dir, "nowhere", "bin")+", and "+filepath.Join(dir, "nowhere")+" does not exist") {
		t.Errorf("dangling: %v", err)
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Error("a dangling link is not a missing file: whoever made it meant something to be there")
	}
	if _, _, err := (Policy{}).Executable(loop); err == nil || !strings.Contains(err.Error(), "symlink loop") {
		t.Errorf("loop: %v", err)
	}
	if _, err := (Policy{}).ReadFile(filepath.Join(dir, "absent"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	notExec := file(t, filepath.Join(dir, "plexporter-noexec"), 0o644)
	if _, _, err := (Policy{}).Executable(notExec); err == nil || !strings.Contains(err.Error(), "is not executable (mode 0644): run chmod +x "+notExec) {
		t.Errorf("not executable: %v", err)
	}
	if _, _, err := (Policy{}).Executable(dir); err == nil || !strings.Contains(err.Error(), "is not a regular file (it is a directory)") {
		t.Errorf("directory: %v", err)
	}
}

func TestReadsOnlyBoundedRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plexporter-x.yaml")
	must(t, syscall.Mkfifo(fifo, 0o644))
	link := filepath.Join(dir, "link.yaml")
	must(t, os.Symlink(fifo, link))
	for _, p := range []string{fifo, link} {
		done := make(chan error, 1)
		go func() { _, err := (Policy{}).ReadFile(p, 1<<20); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "is not a regular file (it is a named pipe (FIFO))") {
				t.Errorf("FIFO %s: %v", p, err)
			}
		case <-time.After(time.Minute): // generous: a loaded machine is slow, a blocked open never ends
			t.Fatalf("reading FIFO %s blocked", p)
		}
	}
	if _, err := (Policy{}).ReadFile("/dev/zero", 1<<20); err == nil || !strings.Contains(err.Error(), "character device") {
		t.Errorf("/dev/zero: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	must(t, os.WriteFile(big, make([]byte, 11), 0o644))
	if _, err := (Policy{}).ReadFile(big, 10); err == nil || !strings.Contains(err.Error(), "is 11 bytes, more than the 10") {
		t.Errorf("oversized: %v", err)
	}
	if data, err := (Policy{}).ReadFile(big, 11); err != nil || len(data) != 11 {
		t.Errorf("at the limit: %d bytes, %v", len(data), err)
	}
}

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// TestOpenGrantSymlinks: a granted path is followed through a symlink only
// where root (or the host's user) alone could have made or changed it
// (issue 28 item 5: a job-mapping link repointed to / by whoever owned the
// directory above it). Each refused case resolves, by path, to the secret
// directory, which is what the ruleset granted before.
func TestOpenGrantSymlinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown)")
	}
	const nobody = 65534
	root := t.TempDir()
	os.Chmod(root, 0o755)
	secret := filepath.Join(root, "secret")
	mkdir(t, secret, 0o700, 0)
	mk := func(path string, mode os.FileMode, uid int) string {
		mkdir(t, filepath.Join(root, path), mode, uid)
		return filepath.Join(root, path)
	}
	link := func(dir string, uid int) string {
		l := filepath.Join(dir, "job-mapping")
		if err := os.Symlink(secret, l); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(l, uid, uid); err != nil {
			t.Fatal(err)
		}
		return l
	}
	userDir := mk("user", 0o755, nobody)
	worldDir := mk("world", 0o777, 0)
	stickyDir := mk("sticky", 0o1777, 0)
	under := mk("user2", 0o755, nobody)
	rootBelowUser := filepath.Join(under, "root")
	mkdir(t, rootBelowUser, 0o755, 0)
	trusted := mk("trusted", 0o755, 0)
	plain := filepath.Join(userDir, "plain")
	mkdir(t, plain, 0o755, nobody)

	refused := map[string]struct{ path, want string }{
		"symlink owned by a user":            {link(mk("a", 0o755, 0), nobody), "symlink " + filepath.Join(root, "a", "job-mapping") + " and the symlink is not owned by root"},
		"symlink in a directory a user owns": {link(userDir, 0), "below the directory " + userDir + ", and the directory is not owned by root"},
		"symlink in a world-writable dir":    {link(worldDir, 0), "below the directory " + worldDir + ", and the directory is writable by group or others"},
		"a user's directory above":           {link(rootBelowUser, 0), "below the directory " + under + ","},
		"a user's symlink in a sticky dir":   {link(mk("sticky2", 0o1777, 0), nobody), "is not owned by root"},
		"through the link, a path below":     {filepath.Join(userDir, "job-mapping", "."), "below the directory " + userDir},
	}
	for name, c := range refused {
		fd, err := openGrant(c.path)
		var ge *GrantError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "granted path "+c.path) {
			t.Errorf("%s: openGrant(%s) = %d, %v; want a GrantError mentioning %q", name, c.path, fd, err, c.want)
		}
		if err == nil {
			unix.Close(fd)
		}
	}

	var secretSt unix.Stat_t
	if err := unix.Stat(secret, &secretSt); err != nil {
		t.Fatal(err)
	}
	same := func(fd int, st *unix.Stat_t) bool {
		var got unix.Stat_t
		return unix.Fstat(fd, &got) == nil && got.Ino == st.Ino && got.Dev == st.Dev
	}
	var plainSt unix.Stat_t
	unix.Stat(plain, &plainSt)
	allowed := map[string]struct {
		path string
		st   *unix.Stat_t
	}{
		"root's link in root's directory":  {link(trusted, 0), &secretSt},
		"root's link in a sticky root dir": {link(stickyDir, 0), &secretSt},
		"no link, in a user's directory":   {plain, &plainSt},
		"relative link and ..":             {relLink(t, trusted), &secretSt},
	}
	for name, c := range allowed {
		fd, err := openGrant(c.path)
		if err != nil {
			t.Errorf("%s: openGrant(%s): %v", name, c.path, err)
			continue
		}
		if !same(fd, c.st) {
			t.Errorf("%s: openGrant(%s) opened another file", name, c.path)
		}
		unix.Close(fd)
	}
	// sysfs's class links are root's, in root's directories.
	if fd, err := openGrant("/sys/class/net/lo"); err != nil {
		t.Errorf("/sys/class/net/lo: %v", err)
	} else {
		unix.Close(fd)
	}
	if _, err := openGrant(filepath.Join(root, "missing")); !errors.Is(err, unix.ENOENT) {
		t.Errorf("a missing grant: %v, want ENOENT (skipped)", err)
	}

	// Resolve refuses the manifest, naming the grant.
	m := &manifest.Manifest{User: "nobody", Paths: manifest.Paths{ReadOnly: manifest.PathList{filepath.Join(userDir, "job-mapping")}}}
	if _, _, err := Resolve(m, "/bin/true", "/x/plexporter-x", Host{}); err == nil || !strings.Contains(err.Error(), "granted path "+filepath.Join(userDir, "job-mapping")) {
		t.Errorf("Resolve: %v, want the grant refused", err)
	}
	m.Paths.ReadOnly = manifest.PathList{filepath.Join(trusted, "job-mapping")}
	if _, _, err := Resolve(m, "/bin/true", "/x/plexporter-x", Host{}); err != nil {
		t.Errorf("Resolve of root's link: %v", err)
	}
}

func relLink(t *testing.T, dir string) string {
	l := filepath.Join(dir, "rel")
	if err := os.Symlink("../secret", l); err != nil {
		t.Fatal(err)
	}
	return l
}

func mkdir(t *testing.T, path string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
	// unix.Chmod: os.FileMode's sticky bit is not 0o1000.
	if err := unix.Chmod(path, uint32(mode)); err != nil {
		t.Fatal(err)
	}
}

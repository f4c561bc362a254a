package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	imageOnce sync.Once
	imageRoot string
	imageErr  error
)

// imageRootfs runs `make image-rootfs` into a temporary directory, once
// per test binary.
func imageRootfs(t *testing.T) string {
	t.Helper()
	needTools(t, "make")
	imageOnce.Do(func() {
		imageRoot = filepath.Join(sharedTempDir(t, "plexporter-image-"), "rootfs")
		cmd := exec.Command("make", "-C", repoRoot(t), "image-rootfs")
		cmd.Env = append(os.Environ(), "IMAGE_ROOTFS="+imageRoot)
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("make image-rootfs: %v\n%s", err, out)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageRoot
}

// TestImageRootfs checks the container image's file tree (there is no
// container engine here: the tree is the image, deploy/Dockerfile copies
// it as it is): static binaries, every plugin with its manifest, the
// plugin directories, passwd and group with the plugins' user, the host's
// runtime directory for the plugin sockets, and nothing else — no shell, libc or CA bundle.
func TestImageRootfs(t *testing.T) {
	root := imageRootfs(t)
	want := map[string]os.FileMode{
		"/usr/bin/plexporter": 0o755,
		"/etc/passwd":         0o644,
		"/etc/group":          0o644,
		// the shipped config, with its capability opt-ins
		"/etc/plexporter/plexporter.yml": 0o644,
	}
	for _, p := range staticPlugins(t) {
		want["/usr/lib/plexporter/plugins/plexporter-"+p] = 0o755
		want["/usr/lib/plexporter/plugins/plexporter-"+p+".yaml"] = 0o644
	}
	dirs := map[string]os.FileMode{
		"/run/plexporter": 0o755, "/etc/plexporter/plugins.d": 0o755, "/usr/lib/plexporter/plugins": 0o755,
	}
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, root)
		if rel == "" {
			return nil
		}
		if fi.IsDir() {
			if mode, ok := dirs[rel]; ok && fi.Mode()&(os.ModePerm|os.ModeSticky) != mode {
				t.Errorf("%s has mode %v, want %v", rel, fi.Mode(), mode)
			}
			if fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("directory %s is writable by group or others (%v)", rel, fi.Mode())
			}
			return nil
		}
		mode, ok := want[rel]
		switch {
		case !ok:
			t.Errorf("unexpected file %s in the image", rel)
		case fi.Mode() != mode:
			t.Errorf("%s has mode %v, want %v", rel, fi.Mode(), mode)
		}
		delete(want, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path := range want {
		t.Errorf("%s missing from the image", path)
	}
	for d := range dirs {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("directory %s missing from the image: %v", d, err)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "etc/plexporter/plugins.d")); len(entries) > 0 {
		t.Errorf("/etc/plexporter/plugins.d is the operator's: the image leaves it empty, has %d entries", len(entries))
	}
	checkStatic(t, filepath.Join(root, "usr/bin/plexporter"))
	for _, p := range staticPlugins(t) {
		checkStatic(t, filepath.Join(root, "usr/lib/plexporter/plugins/plexporter-"+p))
		sameFile(t, filepath.Join(root, "usr/lib/plexporter/plugins/plexporter-"+p+".yaml"), filepath.Join(repoRoot(t), "plugins", p, "plexporter-"+p+".yaml"))
	}

	users := colonFile(t, filepath.Join(root, "etc/passwd"))
	groups := colonFile(t, filepath.Join(root, "etc/group"))
	if u := users["root"]; len(u) < 4 || u[2] != "0" || u[3] != "0" {
		t.Errorf("passwd: root is %v, want uid and gid 0", u)
	}
	for user, group := range map[string]string{"plexporter": "plexporter", "nobody": "nogroup"} {
		u, g := users[user], groups[group]
		if len(u) < 4 || len(g) < 3 || u[2] == "0" || u[3] != g[2] {
			t.Errorf("passwd/group: %s %v with group %s %v, want a non-root user whose primary group it is", user, u, group, g)
		}
	}

	// deploy/Dockerfile copies exactly this tree onto an empty base and
	// runs the host as root.
	df, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var instr []string
	for _, line := range strings.Split(string(df), "\n") {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			instr = append(instr, line)
		}
	}
	for _, want := range []string{"FROM scratch", "COPY . /", "USER 0:0", `ENTRYPOINT ["/usr/bin/plexporter"]`} {
		if !slices.Contains(instr, want) {
			t.Errorf("deploy/Dockerfile lacks %q: %v", want, instr)
		}
	}
	if instr[0] != "FROM scratch" || slices.ContainsFunc(instr, func(s string) bool { return strings.HasPrefix(s, "RUN ") }) {
		t.Errorf("deploy/Dockerfile must be FROM scratch with no RUN (there is no shell in the image): %v", instr)
	}
}

// colonFile reads passwd/group lines by their first field.
func colonFile(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		out[fields[0]] = fields
	}
	return out
}

// TestImageRuns runs the image's host chrooted into the tree, as a
// container runtime would (the tree plus the kernel's /proc, /sys and /dev,
// nothing else), with the image's config as its CMD names it, and requires
// every plugin to start, sandboxed as the image's plexporter user: the
// static binaries, the image's passwd and the shipped config's capability
// opt-ins are all the host needs. Root only (chroot, mounts, the sandbox).
func TestImageRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chroot and the plugin sandbox")
	}
	needTools(t, "unshare", "chroot")
	root := imageRootfs(t)
	script := `set -e
for d in proc sys dev; do mkdir -p "$1/$d"; mount --rbind "/$d" "$1/$d"; done
exec chroot "$1" /usr/bin/plexporter --log.level=debug --config.file=/etc/plexporter/plexporter.yml plugins`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("plexporter plugins in the image: %v\n%s", err, out)
	}
	for _, p := range staticPlugins(t) {
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == p {
				found = f[2] == "running"
			}
		}
		if !found {
			t.Errorf("plugin %s is not running in the image:\n%s", p, out)
		}
	}
	// The host's words for a missing plugin user and for the sandbox off
	// (a plugin's own remark that some path does not exist is not that).
	if strings.Contains(string(out), `user "plexporter" does not exist`) || strings.Contains(string(out), "unconfined") {
		t.Errorf("the image's host cannot run its plugins as the plexporter user, sandboxed:\n%s", out)
	}
}

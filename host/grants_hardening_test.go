package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGrantedSymlinkIsNotFollowed reproduces issue 28 item 5's second half:
// a manifest grants a job-mapping directory to a plugin holding
// CAP_DAC_OVERRIDE (as the attribution plugin's does); whoever can change
// that path (it is their symlink, or it sits in a directory they can
// write) points it at a directory holding a root 0600 file, and the root
// launcher granted what the link led to. Each such plugin must be refused,
// naming the manifest, the grant, the link or directory at fault with its
// owner and mode; a link root made in root's directory still works (sysfs's
// class links are such). Without the check (main) both probes read the key.
func TestGrantedSymlinkIsNotFollowed(t *testing.T) {
	st := newSandboxTree(t)
	const nobody = 65534
	secret := filepath.Join(st.root, "rootonly")
	mkdirOwned(t, secret, 0o700, 0)
	key := filepath.Join(secret, "key")
	if err := os.WriteFile(key, []byte("root secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// job-mapping, repointed by the user owning the directory above it.
	userDir := filepath.Join(st.root, "slurm")
	mkdirOwned(t, userDir, 0o755, nobody)
	symlinkOwned(t, secret, filepath.Join(userDir, "job-mapping"), nobody)
	// root's link, but in a directory a non-root user can write.
	openDir := filepath.Join(st.root, "shared")
	mkdirOwned(t, openDir, 0o777, 0)
	symlinkOwned(t, secret, filepath.Join(openDir, "job-mapping"), 0)
	// root's link in root's directory: granted.
	rootDir := filepath.Join(st.root, "etc")
	mkdirOwned(t, rootDir, 0o755, 0)
	symlinkOwned(t, secret, filepath.Join(rootDir, "job-mapping"), 0)

	manifest := func(grant string) string {
		return fmt.Sprintf("user: nobody\ngroup: nogroup\ncapabilities: [CAP_DAC_OVERRIDE]\npaths:\n  read_only: [%q, /proc/self/status]\nlimits: {memory: 96MiB, nofile: 256}\n", grant)
	}
	plugins := map[string]string{"userlink": userDir, "opendir": openDir, "rootlink": rootDir}
	cfg := ""
	for name, dir := range plugins {
		st.install(t, name, manifest(filepath.Join(dir, "job-mapping")))
		cfg += fmt.Sprintf("  %s: {config: {read_granted: %q}, allow_capabilities: [CAP_DAC_OVERRIDE]}\n", name, filepath.Join(dir, "job-mapping", "key"))
	}
	h := startSandboxHost(t, st, cfg)
	text, mfs := h.scrape("")
	// The probe is one binary installed three times: each alone.
	if one, own := h.scrape("?collect[]=rootlink"); value(mfs, "plexporter_plugin_up", "plugin", "rootlink") != 1 || value(own, "probe_allowed", "action", "read_granted") != 1 {
		t.Fatalf("root's link in root's directory must be granted:\n%s\n%s", one, h.logs.String())
	}
	for name, want := range map[string]string{
		"userlink": "below the directory " + userDir + ", and the directory is not owned by root or the host's user (owner uid 65534 (nobody), mode 0755)",
		"opendir":  "below the directory " + openDir + ", and the directory is writable by group or others (owner uid 0 (root), mode 0777)",
	} {
		if value(mfs, "plexporter_plugin_refused", "plugin", name) != 1 || value(mfs, "plexporter_plugin_up", "plugin", name) != 0 {
			t.Errorf("%s: a grant through a symlink someone else controls must refuse the plugin:\n%s", name, grepLines(text, name))
		}
		said := linesWith(h.logs.String(), `msg="plugin refused" plugin=`+name)
		m := filepath.Join(st.plugins, "plexporter-"+name+".yaml")
		if len(said) != 1 || !strings.Contains(said[0], "manifest "+m+": granted path "+filepath.Join(plugins[name], "job-mapping")) || !strings.Contains(said[0], want) {
			t.Errorf("%s: the refusal must name the manifest, the grant, the link or directory, its owner and mode (%q):\n%s", name, want, said)
		}
		if one, own := h.scrape("?collect[]=" + name); value(own, "probe_allowed", "action", "read_granted") == 1 {
			t.Errorf("%s read the root 0600 file through the link:\n%s", name, grepLines(one, "read_granted"))
		}
	}
}

func mkdirOwned(t *testing.T, path string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func symlinkOwned(t *testing.T, target, link string, uid int) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
}

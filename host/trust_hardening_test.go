package main

// What the host trusts on disk (issue 12, items 3 and 10c), with the real
// host: a manifest, binary or directory someone else could write is
// refused and reported; a FIFO named as a manifest does not hang the
// start; every file named like a plugin that is found but not run is in
// plexporter_plugin_refused and in `plexporter plugins`.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The manifest an attacker with write access to a 0666 manifest would
// write.
const grantEverything = "user: nobody\ngroup: nogroup\ncapabilities: [CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, CAP_SYS_PTRACE, CAP_KILL]\n"

func TestWorldWritableManifestIsRefused(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "good", st.probeManifest(""))
	st.install(t, "open", grantEverything)
	manifest := filepath.Join(st.plugins, "plexporter-open.yaml")
	if err := os.Chmod(manifest, 0o666); err != nil {
		t.Fatal(err)
	}
	h := startSandboxHost(t, st, "")
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_up", "plugin", "good") != 1 {
		t.Fatal("the plugin beside it must run")
	}
	if value(mfs, "plexporter_plugin_refused", "plugin", "open") != 1 || value(mfs, "plexporter_plugin_up", "plugin", "open") != 0 {
		t.Fatal("a plugin whose manifest anyone can write must be refused")
	}
	said := linesWith(h.logs.String(), `msg="plugin refused" plugin=open`)
	if len(said) != 1 || !strings.Contains(said[0], "file "+manifest+" is writable by group or others (owner uid 0 (root), mode 0666): run chmod go-w "+manifest+", or start the host with --plugin.insecure-permissions") {
		t.Fatalf("the refusal must name the manifest, its owner and mode, and the fix:\n%s", h.logs.String())
	}
	if line := pluginsLine(t, "open", "--plugin.dir="+st.plugins, "--plugin.sandbox"); !strings.Contains(line, "refused") || !strings.Contains(line, "chmod go-w "+manifest) {
		t.Errorf("plexporter plugins: %q", line)
	}

	// The documented escape hatch lifts the rule.
	if err := os.WriteFile(manifest, []byte(st.probeManifest("")), 0o666); err != nil {
		t.Fatal(err)
	}
	lax := startSandboxHost(t, st, "", "--plugin.insecure-permissions")
	if _, mfs := lax.scrape(""); value(mfs, "plexporter_plugin_up", "plugin", "open") != 1 {
		t.Fatal("--plugin.insecure-permissions must let it run")
	}
}

// As sshd's StrictModes: every directory from the plugin directory up to /
// counts, and so do the directories of a link's target.
func TestWritableDirectoriesOnTheWayAreRefused(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "probe", st.probeManifest(""))
	for _, dir := range []string{st.root /* above the plugin directory */, st.bin /* the link's target's */} {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		h := startSandboxHost(t, st, "")
		if _, mfs := h.scrape(""); value(mfs, "plexporter_plugin_refused", "plugin", "probe") != 1 {
			t.Errorf("a plugin under a world-writable %s must be refused", dir)
		}
		if !strings.Contains(h.logs.String(), "directory "+dir+" (on the way to "+filepath.Join(st.plugins, "plexporter-probe")+") is writable by group or others (owner uid 0 (root), mode 0777): run chmod go-w "+dir) {
			t.Errorf("the refusal must name %s:\n%s", dir, h.logs.String())
		}
		os.Chmod(dir, 0o755)
	}
	// A root-owned sticky directory above (like /tmp, where the tree is) is
	// fine; one owned by anyone else is not.
	if err := os.Chmod(st.root, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if _, mfs := startSandboxHost(t, st, "").scrape(""); value(mfs, "plexporter_plugin_up", "plugin", "probe") != 1 {
		t.Error("a root-owned sticky directory above must be accepted")
	}
	if err := os.Chown(st.root, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	h := startSandboxHost(t, st, "")
	if _, mfs := h.scrape(""); value(mfs, "plexporter_plugin_refused", "plugin", "probe") != 1 || !strings.Contains(h.logs.String(), "chown root "+st.root) {
		t.Errorf("a sticky directory owned by uid 65534 above must be refused:\n%s", h.logs.String())
	}
}

// A FIFO named as a manifest once hung host start forever: now the host
// starts and refuses that plugin, with the sandbox and without.
func TestFIFOManifestDoesNotHangTheStart(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "good", st.probeManifest(""))
	st.install(t, "fifo", "")
	if err := syscall.Mkfifo(filepath.Join(st.plugins, "plexporter-fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"--plugin.sandbox", "--no-plugin.sandbox"} {
		var args []string // startSandboxHost adds --plugin.sandbox
		if mode == "--no-plugin.sandbox" {
			args = append(args, mode)
		}
		h := startSandboxHost(t, st, "", args...) // waits for /ready
		_, mfs := h.scrape("")
		if value(mfs, "plexporter_plugin_refused", "plugin", "fifo") != 1 || value(mfs, "plexporter_plugin_up", "plugin", "good") != 1 {
			t.Errorf("%s: the FIFO manifest's plugin must be refused and the other run", mode)
		}
		if !strings.Contains(h.logs.String(), "is not a regular file (it is a named pipe (FIFO))") {
			t.Errorf("%s: the refusal must say why:\n%s", mode, h.logs.String())
		}
	}
}

// Item 10c: what discovery finds but cannot run is refused, not only logged.
func TestUnrunnableCandidatesAreRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-alpha")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "plexporter-noexec"), []byte("#!/bin/sh\n"), 0o644)
	os.Symlink("plexporter-loop", filepath.Join(dir, "plexporter-loop"))
	os.Symlink(filepath.Join(dir, "uninstalled"), filepath.Join(dir, "plexporter-dangling"))
	os.WriteFile(filepath.Join(dir, "plexporter-orphan.yaml"), nil, 0o644) // a manifest without a binary
	os.WriteFile(filepath.Join(dir, "README"), nil, 0o644)                 // not a plugin at all

	h := startHostIn(t, dir, "")
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_up", "plugin", "alpha") != 1 {
		t.Fatal("alpha must run")
	}
	reasons := map[string]string{"noexec": "is not executable (mode 0644): run chmod +x", "loop": "symlink loop", "dangling": "dangling symlink"}
	for name, reason := range reasons {
		if value(mfs, "plexporter_plugin_refused", "plugin", name) != 1 || value(mfs, "plexporter_plugin_up", "plugin", name) != 0 {
			t.Errorf("%s must be exported as refused", name)
		}
		if len(linesWith(h.logs.String(), `msg="plugin refused" plugin=`+name, reason)) != 1 {
			t.Errorf("%s: the refusal must be logged with %q", name, reason)
		}
		if line := pluginsLine(t, name, "--plugin.dir="+dir, "--no-plugin.sandbox"); !strings.Contains(line, "refused") || !strings.Contains(line, reason) {
			t.Errorf("plexporter plugins, %s: %q", name, line)
		}
	}
	if n := len(mfs["plexporter_plugin_refused"].GetMetric()); n != len(reasons) {
		t.Errorf("%d plugins refused, want %d (neither the orphan manifest nor README is a plugin)", n, len(reasons))
	}
	if len(linesWith(h.logs.String(), "level=WARN", "plexporter-orphan.yaml: no plugin binary plexporter-orphan")) != 1 {
		t.Errorf("a manifest without a binary must be warned about:\n%s", h.logs.String())
	}
}

// pluginsLine runs `plexporter plugins` and returns the line of plugin name.
func pluginsLine(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "plexporter"), append(args, "plugins")...).CombinedOutput()
	if err != nil {
		t.Fatalf("plexporter plugins: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == name {
			return sc.Text()
		}
	}
	t.Errorf("plexporter plugins lists no %s:\n%s", name, out)
	return ""
}

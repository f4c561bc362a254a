package discover

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func TestScan(t *testing.T) {
	shipped, role := t.TempDir(), t.TempDir()
	write(t, filepath.Join(shipped, "plexporter-rdma"), 0o755)
	write(t, filepath.Join(shipped, "plexporter-rdma.yaml"), 0o644)
	write(t, filepath.Join(shipped, "plexporter-nvme"), 0o755)
	write(t, filepath.Join(shipped, "plexporter-noexec"), 0o644)
	write(t, filepath.Join(shipped, "README"), 0o755)
	write(t, filepath.Join(shipped, "plexporter-Bad Name"), 0o755)
	// the role dir enables rdma by symlink and overrides nvme with its own build
	if err := os.Symlink(filepath.Join(shipped, "plexporter-rdma"), filepath.Join(role, "plexporter-rdma")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(role, "plexporter-nvme"), 0o755)

	res := Scan([]string{shipped, role, filepath.Join(role, "missing")})
	if len(res.Plugins) != 2 || res.Plugins[0].Name != "nvme" || res.Plugins[1].Name != "rdma" {
		t.Fatalf("plugins = %+v", res.Plugins)
	}
	nvme, rdma := res.Plugins[0], res.Plugins[1]
	if nvme.Path != filepath.Join(role, "plexporter-nvme") {
		t.Errorf("later dir must win: %s", nvme.Path)
	}
	if rdma.Target != filepath.Join(shipped, "plexporter-rdma") || rdma.Manifest != filepath.Join(shipped, "plexporter-rdma.yaml") {
		t.Errorf("symlinked plugin: %+v", rdma)
	}
	if len(res.Shadowed) != 2 {
		t.Errorf("shadowed = %+v", res.Shadowed)
	}
	if len(res.Refused) != 1 || res.Refused[0].Name != "noexec" || !strings.Contains(res.Refused[0].Reason, "plexporter-noexec is not executable (mode 0644)") {
		t.Errorf("refused = %+v", res.Refused)
	}
	if joined := problems(res); !strings.Contains(joined, `name "Bad Name"`) || strings.Contains(joined, "noexec") {
		t.Errorf("problems = %s", joined)
	}
}

func problems(res Result) string {
	var out []string
	for _, p := range res.Problems {
		out = append(out, p.Error())
	}
	return strings.Join(out, "\n")
}

// Every file named like a plugin that does not run is refused with its
// reason, so it shows in plexporter_plugin_refused; only files outside the
// naming scheme are mere problems.
func TestScanRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "plexporter-ok"), 0o755)
	write(t, filepath.Join(dir, "plexporter-noexec"), 0o644)
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "plexporter-dangling")); err != nil {
		t.Fatal(err)
	}
	os.Symlink("plexporter-loop2", filepath.Join(dir, "plexporter-loop"))
	os.Symlink("plexporter-loop", filepath.Join(dir, "plexporter-loop2"))
	os.Mkdir(filepath.Join(dir, "plexporter-dir"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "plexporter-fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "plexporter-x.bak"), 0o755) // outside the naming scheme
	write(t, filepath.Join(dir, "notes"), 0o644)

	res := Scan([]string{dir})
	if len(res.Plugins) != 1 || res.Plugins[0].Name != "ok" {
		t.Fatalf("plugins = %+v", res.Plugins)
	}
	want := map[string]string{
		"dangling": "dangling symlink",
		"dir":      "is not a regular file (it is a directory)",
		"fifo":     "is not a regular file (it is a named pipe (FIFO))",
		"loop":     "symlink loop",
		"loop2":    "symlink loop",
		"noexec":   "is not executable (mode 0644): run chmod +x",
	}
	got := map[string]string{}
	for _, r := range res.Refused {
		got[r.Name] = r.Reason
		if r.Path != filepath.Join(dir, Prefix+r.Name) {
			t.Errorf("%s: path %s", r.Name, r.Path)
		}
	}
	for name, reason := range want {
		if !strings.Contains(got[name], reason) {
			t.Errorf("%s: reason %q, want it to contain %q", name, got[name], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("refused = %v", got)
	}
	if p := problems(res); !strings.Contains(p, `name "x.bak"`) || strings.Contains(p, "notes") {
		t.Errorf("problems = %s", p)
	}
}

// A broken candidate in a later directory still wins its name: it is
// refused rather than silently falling back to the earlier one.
func TestLaterBrokenCandidateShadows(t *testing.T) {
	shipped, role := t.TempDir(), t.TempDir()
	write(t, filepath.Join(shipped, "plexporter-rdma"), 0o755)
	write(t, filepath.Join(role, "plexporter-rdma"), 0o644)
	res := Scan([]string{shipped, role})
	if len(res.Plugins) != 0 || len(res.Refused) != 1 || res.Refused[0].Path != filepath.Join(role, "plexporter-rdma") {
		t.Fatalf("plugins %+v, refused %+v", res.Plugins, res.Refused)
	}
	if len(res.Shadowed) != 1 || res.Shadowed[0].Path != filepath.Join(shipped, "plexporter-rdma") {
		t.Fatalf("shadowed = %+v", res.Shadowed)
	}
}

func TestUnusedManifestsAreProblems(t *testing.T) {
	shipped, role := t.TempDir(), t.TempDir()
	write(t, filepath.Join(shipped, "plexporter-nvme"), 0o755)
	write(t, filepath.Join(shipped, "plexporter-nvme.yaml"), 0o644)
	write(t, filepath.Join(role, "plexporter-nvme"), 0o755) // its own build, no manifest
	write(t, filepath.Join(role, "plexporter-gone.yaml"), 0o644)
	if err := os.Symlink(filepath.Join(role, "missing.yaml"), filepath.Join(shipped, "plexporter-nvme2.yaml")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(shipped, "plexporter-nvme2"), 0o755)

	res := Scan([]string{shipped, role})
	p := problems(res)
	for _, want := range []string{
		"manifest " + filepath.Join(shipped, "plexporter-nvme.yaml") + " is not used: plugin nvme runs from " + filepath.Join(role, "plexporter-nvme") + " with no manifest",
		"manifest " + filepath.Join(role, "plexporter-gone.yaml") + ": no plugin binary plexporter-gone in any plugin directory",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("problems lack %q:\n%s", want, p)
		}
	}
	if len(res.Refused) != 0 {
		t.Errorf("a manifest without a binary is not a refused plugin: %+v", res.Refused)
	}
	// a dangling manifest link is the plugin's manifest (refused when read),
	// not a missing one
	for _, pl := range res.Plugins {
		if pl.Name == "nvme2" && pl.Manifest != filepath.Join(shipped, "plexporter-nvme2.yaml") {
			t.Errorf("nvme2 manifest = %q", pl.Manifest)
		}
	}
}

func TestIdentityChangesOnReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plexporter-x")
	write(t, p, 0o755)
	before := Scan([]string{dir}).Plugins[0].Identity
	tmp := filepath.Join(dir, ".new")
	write(t, tmp, 0o755)
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if after := Scan([]string{dir}).Plugins[0].Identity; after == before {
		t.Fatal("identity did not change after replacing the binary")
	}
}

func TestMissingAndEmptyDirectories(t *testing.T) {
	full, empty, onlyManifest := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(full, "plexporter-rdma"), 0o755)
	write(t, filepath.Join(empty, "README"), 0o644)
	write(t, filepath.Join(onlyManifest, "plexporter-nvme.yaml"), 0o644)
	missing := filepath.Join(full, "missing")
	res := Scan([]string{full, empty, missing, onlyManifest})
	if len(res.Missing) != 1 || res.Missing[0] != missing {
		t.Errorf("missing = %v, want [%s]", res.Missing, missing)
	}
	if len(res.Empty) != 2 || res.Empty[0] != empty || res.Empty[1] != onlyManifest {
		t.Errorf("empty = %v, want [%s %s]", res.Empty, empty, onlyManifest)
	}
}

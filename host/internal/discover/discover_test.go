package discover

import (
	"os"
	"path/filepath"
	"strings"
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
	var problems []string
	for _, p := range res.Problems {
		problems = append(problems, p.Error())
	}
	joined := strings.Join(problems, "\n")
	if !strings.Contains(joined, "plexporter-noexec: not an executable") || !strings.Contains(joined, `name "Bad Name"`) {
		t.Errorf("problems = %s", joined)
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

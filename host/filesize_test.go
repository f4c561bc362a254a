package main

// A per-plugin bound on what a plugin can write to disk (issue 29): the
// sandbox sets RLIMIT_FSIZE from limits.file_size and ignores SIGXFSZ, so a
// plugin writing past it gets EFBIG, keeps running and costs nobody else.

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestFileSizeLimitBoundsWrites(t *testing.T) {
	st := newSandboxTree(t)
	out := filepath.Join(st.root, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(out, 0o777) // the plugin user may write; only the limit bounds it
	st.install(t, "writer", fmt.Sprintf("user: nobody\ngroup: nogroup\npaths: {read_only: [/proc/self/status], read_write: [%q]}\nlimits: {memory: 96MiB, file_size: 1MiB}\n", out))
	st.install(t, "probe", st.probeManifest(""))
	cfg := fmt.Sprintf("  writer: {config: {write_file: %q, write_mib: 4}}\n  probe: %s\n", filepath.Join(out, "big"), st.probeConfig(0))

	h := startSandboxHost(t, st, cfg)
	for range 3 { // three collects: the plugin survives each
		// One binary installed twice: each plugin's probe_* series alone.
		_, mfs := h.scrape("?collect[]=writer")
		if got := value(mfs, "probe_written_bytes"); got != 1<<20 {
			t.Errorf("wrote %v bytes under limits.file_size 1MiB, want %d", got, 1<<20)
		}
		if value(mfs, "probe_allowed", "action", "write_file", "detail", "file too large") != 0 {
			t.Errorf("the write past the bound must fail with EFBIG (file too large): %v", mfs["probe_allowed"])
		}
		if value(mfs, "plexporter_plugin_up", "plugin", "writer") != 1 || value(mfs, "plexporter_plugin_restarts_total", "plugin", "writer") > 0 {
			t.Errorf("the writer must keep running (SIGXFSZ ignored), not die and restart")
		}
		if _, other := h.scrape("?collect[]=probe"); value(other, "plexporter_plugin_scrape_success", "plugin", "probe") != 1 || value(other, "probe_allowed", "action", "read_granted") != 1 {
			t.Errorf("the other plugin was affected")
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "big")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the file on disk: %v %v, want 1 MiB", fi, err)
	}

	// Without the sandbox (no rlimit) the same plugin writes all 4 MiB, so
	// the assertions above can fail.
	off := startSandboxHost(t, st, cfg, "--no-plugin.sandbox")
	_, mfs := off.scrape("?collect[]=writer")
	if got := value(mfs, "probe_written_bytes"); got != 4<<20 || value(mfs, "probe_allowed", "action", "write_file", "detail", "ok") != 1 {
		t.Errorf("unconfined, the writer wrote %v bytes, want all %d", got, 4<<20)
	}
}

package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/launch"
)

// socketMounts lists the mount points of plugin socket-directory tmpfs
// mounts at or below dir.
func socketMounts(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") && strings.Contains(sc.Text(), " - tmpfs plexporter-plugin ") {
			out = append(out, fields[4])
		}
	}
	return out
}

// TestPluginCannotFillTheRuntimeDirectory reproduces issue 28 item 8: a
// sandboxed plugin writes into its socket directory until the file system
// refuses, first 64 KiB files, then empty ones. The runtime directory is a
// tmpfs of its own here (16 MiB, 4096 inodes, as /run is one shared with
// systemd): on main the plugin filled it to the last block and inode; with
// each socket directory a tmpfs of launch.SocketDirBytes and
// SocketDirInodes, the plugin gets ENOSPC within its own bound, the runtime
// directory keeps almost all its blocks and inodes, the other plugin keeps
// working. The mounts go when the host stops, and a host that was killed
// leaves them for the next host, which unmounts them before removing the
// directory.
func TestPluginCannotFillTheRuntimeDirectory(t *testing.T) {
	st := newSandboxTree(t)
	base := shortTempDir(t)
	if err := unix.Mount("plexporter-test-run", base, "tmpfs", 0, "size=16m,nr_inodes=4096,mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs for the runtime directory: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(base, unix.MNT_DETACH) })
	var before unix.Statfs_t
	if err := unix.Statfs(base, &before); err != nil {
		t.Fatal(err)
	}
	st.install(t, "filler", st.probeManifest(""))
	st.install(t, "probe", st.probeManifest(""))
	cfg := "  filler: {config: {fill_socket_dir: true}, timeout: 60s}\n  probe: " + st.probeConfig(0) + "\n"
	h := startSandboxHost(t, st, cfg, "--plugin.runtime-dir="+base)
	text, filler := h.scrape("?collect[]=filler")
	if value(filler, "plexporter_plugin_up", "plugin", "filler") != 1 || value(filler, "plexporter_plugin_sandboxed", "plugin", "filler") != 1 {
		t.Fatalf("the filler is not up and sandboxed:\n%s\n%s", text, h.logs.String())
	}
	bytes, files := value(filler, "probe_filled", "what", "bytes"), value(filler, "probe_filled", "what", "files")
	t.Logf("the filler wrote %.0f bytes in %.0f files", bytes, files)
	if value(filler, "probe_allowed", "action", "fill_socket_dir_enospc") != 1 {
		t.Errorf("the filler's writes must end in ENOSPC:\n%s", grepLines(text, "fill_socket_dir"))
	}
	if bytes > launch.SocketDirBytes || files > launch.SocketDirInodes {
		t.Errorf("the filler wrote %.0f bytes in %.0f files, more than its directory's bound (%d bytes, %d inodes)", bytes, files, launch.SocketDirBytes, launch.SocketDirInodes)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(base, &after); err != nil {
		t.Fatal(err)
	}
	t.Logf("runtime directory: %d of %d blocks and %d of %d inodes free before, %d and %d after", before.Bfree, before.Blocks, before.Ffree, before.Files, after.Bfree, after.Ffree)
	if after.Bfree < before.Bfree*9/10 || after.Ffree < before.Ffree*9/10 {
		t.Errorf("the plugin filled the runtime directory: %d of %d blocks and %d of %d inodes free (before: %d, %d)", after.Bfree, after.Blocks, after.Ffree, after.Files, before.Bfree, before.Ffree)
	}
	if _, mfs := h.scrape("?collect[]=probe"); value(mfs, "plexporter_plugin_up", "plugin", "probe") != 1 || value(mfs, "probe_allowed", "action", "read_granted") != 1 {
		t.Errorf("the other plugin must keep working")
	}
	mounts := socketMounts(t, base)
	if len(mounts) != 2 {
		t.Fatalf("want one socket-directory tmpfs per plugin below %s, got %v", base, mounts)
	}

	// A killed host leaves its mounts; the next host unmounts them and
	// removes the directory.
	h.cmd.Process.Kill()
	h.cmd.Wait()
	if left := socketMounts(t, base); len(left) != 2 {
		t.Fatalf("a killed host cannot unmount; the test expects its mounts left, got %v", left)
	}
	next := startSandboxHost(t, st, "  probe: "+st.probeConfig(0)+"\n  filler: {enabled: false}\n", "--plugin.runtime-dir="+base)
	next.waitFor(minWait, "the next host's plugin", func() bool {
		_, mfs := next.scrape("?collect[]=probe")
		return value(mfs, "plexporter_plugin_up", "plugin", "probe") == 1
	})
	now := socketMounts(t, base)
	for _, m := range mounts {
		for _, n := range now {
			if n == m {
				t.Errorf("the next host left the dead host's mount %s", m)
			}
		}
	}
	if len(now) != 1 {
		t.Errorf("want only the next host's plugin's mount, got %v", now)
	}
	if !strings.Contains(next.logs.String(), "removed the socket directory of a host that is gone") {
		t.Errorf("the dead host's directory was not removed:\n%s", next.logs.String())
	}
	// A clean stop unmounts.
	next.cmd.Process.Signal(os.Interrupt)
	next.cmd.Wait()
	if left := socketMounts(t, base); len(left) != 0 {
		t.Errorf("mounts left after a clean stop: %v", left)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPinHoldsWhatTheScrapeReads: the descriptors that keep the procfs
// dentries (and so the inodes the sandbox's Landlock rules name) are of
// exactly the paths the scrape reads, a missing one is skipped, and release
// closes them. The reclaim itself is the real-kernel lab's
// nfs/after-dentry-reclaim (test/lab).
func TestPinHoldsWhatTheScrapeReads(t *testing.T) {
	dir := t.TempDir()
	mountstats := filepath.Join(dir, "mountstats")
	net := filepath.Join(dir, "net")
	if err := os.WriteFile(mountstats, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(net, 0o755); err != nil {
		t.Fatal(err)
	}
	p := pin(mountstats, filepath.Join(dir, "mountinfo"), net)
	if len(p) != 2 {
		t.Fatalf("pinned %d paths, want 2 (mountinfo does not exist)", len(p))
	}
	var held []string
	for _, fd := range p {
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, target)
	}
	if held[0] != mountstats || held[1] != net {
		t.Errorf("pinned %v, want [%s %s]", held, mountstats, net)
	}
	p.release()
	for _, fd := range p {
		// The number may have been reused since; never for these paths.
		if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && (target == mountstats || target == net) {
			t.Errorf("fd %d still holds %s after release", fd, target)
		}
	}
}

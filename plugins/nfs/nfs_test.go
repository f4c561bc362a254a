package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// procRoot lays out a procfs root the way the kernel does for the plugin:
// <root>/4242/{mountstats,net/tcp,net/tcp6} and <root>/self -> 4242, from
// flat fixture files in testdata/ ("" leaves a file out).
func procRoot(t *testing.T, mountstats, tcp, tcp6 string) string {
	t.Helper()
	root := t.TempDir()
	pid := filepath.Join(root, "4242")
	if err := os.MkdirAll(filepath.Join(pid, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("4242", filepath.Join(root, "self")); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{mountstats: "mountstats", tcp: "net/tcp", tcp6: "net/tcp6"} {
		if src == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pid, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name, mountstats, tcp, tcp6 string
		wantErrors                  int
	}{
		{"nfs4.2-nconnect4", "mountstats-nfs4.2-nconnect4", "tcp-synthetic", "tcp6-synthetic", 0},
		{"nfs3-tcp", "mountstats-nfs3-tcp", "tcp-synthetic", "tcp6-synthetic", 0},
		{"mixed", "mountstats-mixed", "tcp-synthetic", "tcp6-synthetic", 0},
		{"real-6.1", "mountstats-real-6.1", "tcp-real-6.1", "tcp6-real-6.1", 0},
		{"oldkernel-transports", "mountstats-oldkernel-transports", "tcp-synthetic", "", 0},
		// procfs rejects this file (28 events, 14-number tcp line); the
		// tolerant parser keeps both mounts and reports the two unreadable lines (vsock xprt, non-numeric per-op).
		{"future", "mountstats-future", "tcp-synthetic", "tcp6-synthetic", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := procRoot(t, tc.mountstats, tc.tcp, tc.tcp6)
			res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
			if res.Status != nil {
				t.Fatalf("collect failed: %v", res.Status)
			}
			if len(res.Errors) != tc.wantErrors {
				t.Errorf("got %d partial errors, want %d: %v", len(res.Errors), tc.wantErrors, res.Errors)
			}
			text := res.Text(t)
			sdktest.Golden(t, text, filepath.Join("testdata", tc.name+".golden"))
			if out := sdktest.Promtool(t, text); strings.TrimSpace(out) != "" {
				t.Errorf("promtool check metrics:\n%s", out)
			}
		})
	}
}

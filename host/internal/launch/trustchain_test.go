package launch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/sandbox"
)

// The binary that runs is the one the host hashed (issue 28, item 5): an
// attacker who renames another file over the plugin's path after the
// host's check (the pin, the permission check) does not get it executed,
// unconfined or sandboxed. The swap is made between the two steps here,
// where a real attacker must win a race (inotify-timed RENAME_EXCHANGE).
func TestExecutesTheFileItHashed(t *testing.T) {
	for _, sandboxed := range []bool{false, true} {
		name := "unconfined"
		if sandboxed {
			name = "sandboxed"
		}
		t.Run(name, func(t *testing.T) {
			if sandboxed && os.Geteuid() != 0 {
				t.Skip("the sandbox launcher needs root")
			}
			if sandboxed {
				// This test binary is the launcher (TestMain): it must be
				// one that can sandbox (a CGO_ENABLED=0 build).
				if err := sandbox.CheckHost(); err != nil {
					t.Skip(err)
				}
			}
			dir := t.TempDir()
			// The plugin user writes its mark here.
			if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "plexporter-x")
			script := func(who string) []byte { return []byte("#!/bin/sh\necho " + who + " >\"$MARK\"\n") }
			if err := os.WriteFile(path, script("hashed"), 0o755); err != nil {
				t.Fatal(err)
			}
			bin, sum, err := openBinary(path)
			if err != nil {
				t.Fatal(err)
			}
			defer bin.Close()
			if want, _ := FileSHA256(path); sum != want {
				t.Fatalf("openBinary hashed %s, the file is %s", sum, want)
			}
			// The swap: a new file renamed over the checked path.
			evil := filepath.Join(dir, "evil")
			if err := os.WriteFile(evil, script("swapped"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(evil, path); err != nil {
				t.Fatal(err)
			}

			mark := filepath.Join(dir, "mark")
			p := discover.Plugin{Name: "x", Path: path, Target: path}
			o := Options{}
			if sandboxed {
				o.Sandbox = &sandbox.Spec{
					Binary: path, Argv0: path, UID: 65534, GID: 65534, Landlock: true, PIDNamespace: true,
					ReadOnly: []string{"/bin", "/usr/bin"}, ReadWrite: []string{dir},
				}
			}
			cmd, err := command(p, o, bin, []string{"PATH=" + searchPath, "MARK=" + mark}, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			run, err := newProcessRunner(cmd, path, "x", "", slog.New(slog.DiscardHandler), func(stderr io.ReadCloser, _ *crashNote) io.ReadCloser { return stderr })
			if err != nil {
				t.Fatal(err)
			}
			stderr := make(chan string, 1)
			go func() { b, _ := io.ReadAll(run.stderr); stderr <- string(b) }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := run.Start(ctx); err != nil {
				t.Fatal(err)
			}
			errText := <-stderr
			run.Wait(ctx)
			got, _ := os.ReadFile(mark)
			if strings.TrimSpace(string(got)) != "hashed" {
				t.Fatalf("ran %q (exit %v), want the file the host hashed; stderr: %s", got, run.exitErr, errText)
			}
		})
	}
}

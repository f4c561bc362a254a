package main

// Tests of issue 27 items 9 and 10 (the vendor path and the operator's
// papercuts), on the built binary.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// `plexporter metrics --markdown` lists the host's own plexporter_*
// families beside the plugins': every one a running host serves.
func TestMetricsMarkdownListsHostFamilies(t *testing.T) {
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 1}}\n")
	_, mfs := h.scrape("")
	out, err := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+h.dir, "--no-plugin.sandbox", "metrics", "--markdown").Output()
	if err != nil {
		t.Fatalf("metrics --markdown: %v\n%s", err, out)
	}
	var missing []string
	for name := range mfs {
		if strings.HasPrefix(name, "plexporter_") && !strings.Contains(string(out), "| (host) | `"+name+"` |") {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("metrics --markdown lacks the host's %v:\n%s", missing, out)
	}
	if !strings.Contains(string(out), "| alpha | `chaos_shared` | gauge |") {
		t.Errorf("metrics --markdown lacks the plugin's families:\n%s", out)
	}
}

// An instance that dies during the collect `plexporter plugins` makes is
// not listed as running.
func TestPluginsShowsAnInstanceThatDiedInItsCollect(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-dies"))
	cfg := filepath.Join(t.TempDir(), "c.yml")
	os.WriteFile(cfg, []byte("plugins:\n  dies: {config: {series: 9000, exit_mid_stream: true}}\n"), 0o644)
	line := pluginsLine(t, "dies", "--plugin.dir="+dir, "--config.file="+cfg, "--no-plugin.sandbox")
	if f := strings.Fields(line); len(f) < 3 || f[2] == "running" || !strings.Contains(line, "died during its collect") || !strings.Contains(line, "exit status 3") {
		t.Errorf("plugins line of an instance that exited in its collect: %q; want a state other than running and the exit", line)
	}
}

// A plugin directory that does not exist (a typo in --plugin.dir) is an
// error naming it, for serve and the commands alike, unless
// --plugin.allow-missing-dir says it may be missing.
func TestMissingPluginDirIsAnError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "plugins.typo")
	for _, cmd := range [][]string{{"--web.listen-address=" + freePort(t)}, {"plugins"}, {"metrics"}} {
		// Bounded: a host that does not refuse serves until killed.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "plexporter"), append([]string{"--plugin.dir=" + missing, "--no-plugin.sandbox"}, cmd...)...).CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "plugin directory "+missing+" does not exist") || !strings.Contains(string(out), "--plugin.allow-missing-dir") {
			t.Errorf("%v with a missing --plugin.dir: %v; want exit 1 naming the directory and the flag:\n%s", cmd, err, out)
		}
	}
	if out, err := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+missing, "--plugin.allow-missing-dir", "--no-plugin.sandbox", "metrics").CombinedOutput(); err != nil || !strings.Contains(string(out), "plugin directory does not exist") {
		t.Errorf("with --plugin.allow-missing-dir: %v; want success and a warning:\n%s", err, out)
	}
}

// An allowlist glob that selects no family is warned about by name, also
// when a plugin's catalogue has a family named only at run time
// (plexporter-so's "*", which used to excuse every glob).
func TestUnmatchedAllowlistGlobIsWarnedWithSoInstalled(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-alpha"))
	os.Symlink(filepath.Join(binDir, "shipped", "plexporter-so"), filepath.Join(dir, "plexporter-so"))
	h := startHostIn(t, dir, "", "--metrics.enabled=chaos_shared,chaos_sharde,so_collection_*")
	h.waitFor(30*time.Second, "a warning naming chaos_sharde", func() bool {
		return len(linesWith(h.logs.String(), "level=WARN", "matches no family", "pattern=chaos_sharde")) == 1
	})
	for _, p := range []string{"pattern=chaos_shared", "pattern=so_collection_"} {
		if l := linesWith(h.logs.String(), "matches no family", p); len(l) != 0 {
			t.Errorf("a glob that matches was warned about: %v", l)
		}
	}
}

// A crash's reason — the Go panic's first line, the runtime's fatal
// signal — is in the "plugin down" line, which is logged at ERROR (the
// default level shows it), not only "exit status 2".
func TestCrashReasonInThePluginDownLine(t *testing.T) {
	for crash, want := range map[string]string{
		"panic": "exit status 2: panic: chaos: crash asked for",
		"segv":  "[signal SIGSEGV: segmentation violation",
		"abort": "exit status 2: SIGABRT: abort",
	} {
		t.Run(crash, func(t *testing.T) {
			h := startHost(t, []string{"alpha"}, "  alpha: {config: {crash: "+crash+"}}\n")
			h.scrape("")
			h.waitFor(30*time.Second, "the plugin down line", func() bool {
				return len(linesWith(h.logs.String(), "level=ERROR", "plugin down", "plugin=alpha")) > 0
			})
			if l := linesWith(h.logs.String(), "level=ERROR", "plugin down", "plugin=alpha", want); len(l) == 0 {
				t.Errorf("no plugin down line with %q:\n%s", want, strings.Join(linesWith(h.logs.String(), "plugin down"), "\n"))
			}
		})
	}
}

// A stdout line longer than go-plugin's 64 KiB scanner (a library's
// printf) no longer stops the host reading the plugin's stdout: the
// plugin's next writes do not block, every collect succeeds, nothing is
// restarted, and the cut is warned about once.
func TestLongStdoutLineDoesNotStallThePlugin(t *testing.T) {
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 1, stdout_bytes: 200000}}\n", "--scrape.timeout=3s")
	for i := range 6 {
		_, mfs := h.scrape("")
		if v := value(mfs, "plexporter_plugin_scrape_success", "plugin", "alpha"); v != 1 {
			t.Fatalf("scrape %d: scrape_success %v, want 1 (a blocked stdout write stalls the collect)", i+1, v)
		}
		if v := value(mfs, "plexporter_plugin_restarts_total", "plugin", "alpha"); v != 0 {
			t.Fatalf("scrape %d: %v restarts", i+1, v)
		}
	}
	if n := len(linesWith(h.logs.String(), "level=WARN", "plugin=alpha", "longer than the host reads to stdout")); n != 1 {
		t.Errorf("%d warnings about the long stdout line, want 1", n)
	}
}

// A plugin the sandbox user cannot execute (mode 0744, root's) is said
// to be that, with the user, not "built for another architecture".
func TestUnexecutableBySandboxUserSaysPermissionDenied(t *testing.T) {
	st := newSandboxTree(t)
	bin := filepath.Join(st.plugins, "plexporter-private")
	copyFile(t, filepath.Join(binDir, "probe"), bin, 0o744)
	if err := os.Chmod(bin, 0o744); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin+".yaml", []byte("user: nobody\ngroup: nogroup\n"), 0o644)
	line := pluginsLine(t, "private", "--plugin.dir="+st.plugins, "--plugin.sandbox")
	for _, want := range []string{"permission denied", bin, "mode 0744", "sandbox user nobody"} {
		if !strings.Contains(line, want) {
			t.Errorf("plugins line lacks %q: %q", want, line)
		}
	}
	if strings.Contains(line, "built for this architecture") {
		t.Errorf("plugins line blames the architecture: %q", line)
	}
}

package fleet

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/manifest"
)

// reconcileRefusals reconciles a fleet over dir in which no plugin can start,
// so the test needs no plugin process, and returns its refusals by name and
// its log.
func reconcileRefusals(t *testing.T, opts Options) (map[string]string, string) {
	t.Helper()
	var logs bytes.Buffer
	f := New(opts, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := f.Reconcile(); err != nil {
		t.Fatal(err)
	}
	defer f.StopAll()
	if n := len(f.Supervisors()); n != 0 {
		t.Fatalf("%d plugins started; every one should be refused", n)
	}
	out := map[string]string{}
	for _, r := range f.Refused() {
		out[r.Plugin.Name] = r.Reason
	}
	return out, logs.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every file named like a plugin that is found but not run is a refusal
// (plexporter_plugin_refused, `plexporter plugins`), sandbox or not.
func TestCandidatesThatCannotRunAreRefused(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "plexporter-noexec"), []byte("#!/bin/sh\n"), 0o644))
	must(t, os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "plexporter-dangling")))
	must(t, os.Symlink("plexporter-loop", filepath.Join(dir, "plexporter-loop")))
	must(t, os.WriteFile(filepath.Join(dir, "plexporter-off"), nil, 0o644))
	cfg := filepath.Join(t.TempDir(), "plexporter.yml")
	must(t, os.WriteFile(cfg, []byte("plugins:\n  off: {enabled: false}\n"), 0o644))

	refused, logs := reconcileRefusals(t, Options{Dirs: []string{dir}, ConfigFile: cfg})
	for name, reason := range map[string]string{
		"noexec":   "is not executable (mode 0644): run chmod +x",
		"dangling": "dangling symlink",
		"loop":     "symlink loop",
	} {
		if !strings.Contains(refused[name], reason) {
			t.Errorf("%s: refused for %q, want %q", name, refused[name], reason)
		}
		if !strings.Contains(logs, `msg="plugin refused" plugin=`+name) {
			t.Errorf("%s: refusal not logged:\n%s", name, logs)
		}
	}
	if r, ok := refused["off"]; ok {
		t.Errorf("a plugin the config file disables is not refused: %s", r)
	}
	if len(refused) != 3 {
		t.Errorf("refused = %v", refused)
	}
}

// Under the sandbox the binary, its manifest, the config file and every
// directory and symlink on the way to them must be root's (or the host's
// user's) and writable by nobody else; --plugin.insecure-permissions lifts
// that and nothing else.
func TestUntrustedFilesAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	root := t.TempDir()
	plugins, bin, writable := filepath.Join(root, "plugins"), filepath.Join(root, "bin"), filepath.Join(root, "writable")
	for _, d := range []string{plugins, bin, writable} {
		must(t, os.Mkdir(d, 0o755))
	}
	must(t, os.Chmod(writable, 0o777))
	binary := func(dir, name string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755))
		return p
	}
	// manifest: a 0666 one granting everything, as found in the wild
	must(t, os.Symlink(binary(bin, "m"), filepath.Join(plugins, "plexporter-manifest")))
	m := filepath.Join(plugins, "plexporter-manifest.yaml")
	must(t, os.WriteFile(m, []byte("capabilities: [CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, CAP_SYS_PTRACE, CAP_KILL]\n"), 0o644))
	must(t, os.Chmod(m, 0o666))
	// the target of a link lives in a world-writable directory
	must(t, os.Symlink(binary(writable, "t"), filepath.Join(plugins, "plexporter-target")))
	// the link passes through a world-writable directory on the way
	must(t, os.Symlink(filepath.Join(bin, "t2"), filepath.Join(writable, "hop")))
	binary(bin, "t2")
	must(t, os.Symlink(filepath.Join(writable, "hop"), filepath.Join(plugins, "plexporter-hop")))
	// the manifest is another user's
	must(t, os.Symlink(binary(bin, "o"), filepath.Join(plugins, "plexporter-owner")))
	o := filepath.Join(plugins, "plexporter-owner.yaml")
	must(t, os.WriteFile(o, nil, 0o644))
	must(t, os.Chown(o, 65534, 65534))
	// a FIFO as manifest must not hang the scan
	must(t, os.Symlink(binary(bin, "f"), filepath.Join(plugins, "plexporter-fifo")))
	must(t, mkfifo(filepath.Join(plugins, "plexporter-fifo.yaml")))

	opts := Options{Dirs: []string{plugins}, Sandbox: true}
	refused, _ := reconcileRefusals(t, opts)
	want := map[string]string{
		"manifest": "manifest " + m + ": file " + m + " is writable by group or others (owner uid 0 (root), mode 0666): run chmod go-w " + m + ", or start the host with --plugin.insecure-permissions",
		"target":   "directory " + writable + " (on the way to " + filepath.Join(plugins, "plexporter-target") + ") is writable by group or others",
		"hop":      "directory " + writable + " (on the way to " + filepath.Join(plugins, "plexporter-hop") + ") is writable by group or others",
		"owner":    "file " + o + " is not owned by root or the host's user (owner uid 65534",
		"fifo":     "is not a regular file (it is a named pipe (FIFO))",
	}
	for name, reason := range want {
		if !strings.Contains(refused[name], reason) {
			t.Errorf("%s: refused for %q,\nwant %q", name, refused[name], reason)
		}
	}

	// The directory above the plugin directory, too.
	must(t, os.Chmod(root, 0o777))
	refused, _ = reconcileRefusals(t, opts)
	for name := range want {
		if !strings.Contains(refused[name], "directory "+root+" (on the way to") && name != "owner" {
			t.Errorf("%s with a world-writable %s above: %q", name, root, refused[name])
		}
	}
	must(t, os.Chmod(root, 0o755))

	// The config file grants what a manifest grants.
	cfg := filepath.Join(root, "plexporter.yml")
	must(t, os.WriteFile(cfg, []byte("plugins:\n  target: {manifest: {capabilities: [CAP_SYS_ADMIN]}}\n"), 0o644))
	must(t, os.Chmod(cfg, 0o666))
	f := New(Options{Dirs: []string{plugins}, ConfigFile: cfg, Sandbox: true}, slog.New(slog.DiscardHandler))
	if err := f.Reconcile(); err == nil || !strings.Contains(err.Error(), "config file "+cfg+": file "+cfg+" is writable by group or others") {
		t.Errorf("0666 config file: %v", err)
	}

	// --plugin.insecure-permissions lifts the ownership and mode rules,
	// but never the reading ones: the 0666 manifest in a world-writable
	// directory is read (and refused for what it says, the next check,
	// so that nothing starts); the FIFO is still refused.
	lax := filepath.Join(writable, "plugins")
	must(t, os.Mkdir(lax, 0o777))
	must(t, os.Chmod(lax, 0o777))
	must(t, os.Symlink(filepath.Join(bin, "m"), filepath.Join(lax, "plexporter-lax")))
	must(t, os.WriteFile(filepath.Join(lax, "plexporter-lax.yaml"), []byte("user: no-such-user-here\n"), 0o666))
	must(t, os.Chmod(filepath.Join(lax, "plexporter-lax.yaml"), 0o666))
	must(t, os.Symlink(filepath.Join(bin, "f"), filepath.Join(lax, "plexporter-fifo")))
	must(t, mkfifo(filepath.Join(lax, "plexporter-fifo.yaml")))
	for _, insecure := range []bool{false, true} {
		refused, _ = reconcileRefusals(t, Options{Dirs: []string{lax}, Sandbox: true, InsecurePermissions: insecure})
		if got := refused["lax"]; insecure != strings.Contains(got, `user "no-such-user-here"`) || insecure == strings.Contains(got, "writable by group or others") {
			t.Errorf("insecure permissions %v: lax refused for %q", insecure, got)
		}
		if got := refused["fifo"]; insecure != strings.Contains(got, "named pipe") || insecure == strings.Contains(got, "writable by group or others") {
			t.Errorf("insecure permissions %v: fifo refused for %q", insecure, got)
		}
	}
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }

func TestPluginWithoutManifestIsWarnedAboutUnderTheSandbox(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plexporter-demo")
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	p := discover.Plugin{Name: "demo", Path: bin, Target: bin}
	for _, sandboxed := range []bool{true, false} {
		f := New(Options{Sandbox: sandboxed, InsecurePermissions: true}, slog.New(slog.DiscardHandler))
		_, warns, _ := f.settings(p, &config.File{})
		got := strings.Join(warns, "\n")
		if want := "plugin has no manifest (" + bin + ".yaml"; sandboxed != strings.Contains(got, want) {
			t.Errorf("sandbox %v: warnings %q; want the no-manifest warning only under the sandbox", sandboxed, got)
		}
		if sandboxed && !strings.Contains(got, "default sandbox, which grants nothing") {
			t.Errorf("the warning must say what the default sandbox is: %q", got)
		}
		// With a manifest, or an override in the config file, no warning.
		_, warns, _ = f.settings(p, &config.File{Plugins: map[string]config.Plugin{"demo": {Manifest: &manifest.Manifest{}}}})
		if strings.Contains(strings.Join(warns, "\n"), "no manifest") {
			t.Errorf("sandbox %v: a config file override is a manifest: %q", sandboxed, warns)
		}
	}
}

// Under the sandbox a manifest granting a capability beyond the known-safe
// ones is refused without the config file's opt-in, naming the line; with
// it, it is not refused for that (here it is refused later, for a user that
// does not exist, so that no plugin process starts). A section holding only
// an opt-in, for a plugin that is not installed, is not warned about; one
// with other settings is.
func TestCapabilityOptInRefusesUnderTheSandbox(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"admin", "allowed"} {
		must(t, os.WriteFile(filepath.Join(dir, "plexporter-"+name), []byte("#!/bin/sh\n"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "plexporter-"+name+".yaml"), []byte("user: no-such-user-for-this-test\ncapabilities: [CAP_SYS_ADMIN]\n"), 0o644))
	}
	cfg := filepath.Join(t.TempDir(), "plexporter.yml")
	must(t, os.WriteFile(cfg, []byte("plugins:\n  allowed: {allow_capabilities: [CAP_SYS_ADMIN]}\n  absent: {allow_capabilities: [CAP_BPF]}\n  gone: {timeout: 3s}\n"), 0o644))

	refused, logs := reconcileRefusals(t, Options{Dirs: []string{dir}, ConfigFile: cfg, Sandbox: true, InsecurePermissions: true})
	if want := `add "allow_capabilities: [CAP_SYS_ADMIN]" under plugins.admin in ` + cfg; !strings.Contains(refused["admin"], want) {
		t.Errorf("admin: refused for %q, want %q", refused["admin"], want)
	}
	if strings.Contains(refused["allowed"], "allow_capabilities") || !strings.Contains(refused["allowed"], "no-such-user-for-this-test") {
		t.Errorf("allowed: refused for %q, want only the missing user", refused["allowed"])
	}
	if strings.Contains(logs, "plugin=absent") || !strings.Contains(logs, "plugin=gone") {
		t.Errorf("want the not-installed warning for gone only:\n%s", logs)
	}
}

// A section under a plugin's former name (RenamedPlugins) is never
// silently ignored: the warning names the section to write instead, also
// for a section holding only an opt-in. A plugin still installed under the
// former name (an operator's own copy) is configured by it as before.
func TestSectionOfARenamedPluginNamesTheNewSection(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "plexporter-ernic"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "plexporter-ernic.yaml"), []byte("user: no-such-user-for-this-test\n"), 0o644))
	cfg := filepath.Join(t.TempDir(), "plexporter.yml")
	for _, section := range []string{
		"ionic: {config: {run_dir: /run/rocm-ernic}}",
		"ionic: {enabled: false}",
		"ionic: {allow_capabilities: [CAP_BPF]}",
	} {
		must(t, os.WriteFile(cfg, []byte("plugins:\n  "+section+"\n"), 0o644))
		_, logs := reconcileRefusals(t, Options{Dirs: []string{dir}, ConfigFile: cfg, Sandbox: true, InsecurePermissions: true})
		want := "rename the section plugins.ionic to plugins.ernic in " + cfg
		if !strings.Contains(logs, want) || !strings.Contains(logs, "renamed_to=ernic") {
			t.Errorf("%s: want a warning saying %q, logs:\n%s", section, want, logs)
		}
	}

	// The former name installed: its section is its own, no rename warning.
	must(t, os.WriteFile(filepath.Join(dir, "plexporter-ionic"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "plexporter-ionic.yaml"), []byte("user: no-such-user-for-this-test\n"), 0o644))
	must(t, os.WriteFile(cfg, []byte("plugins:\n  ionic: {timeout: 3s}\n"), 0o644))
	refused, logs := reconcileRefusals(t, Options{Dirs: []string{dir}, ConfigFile: cfg, Sandbox: true, InsecurePermissions: true})
	if strings.Contains(logs, "renamed") || refused["ionic"] == "" {
		t.Errorf("an installed ionic: want no rename warning and ionic refused for its user; refused %v, logs:\n%s", refused, logs)
	}
}

package main

// End-to-end tests of a plugin's lifecycle as the operator sees it: a
// configuration the plugin rejects, configuration warnings, sandbox-hint
// drift, who speaks in the log, and how stops and crashes are logged. Real
// plexporter, real chaos plugin processes, real gRPC.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// linesWith returns the log lines containing every one of subs.
func linesWith(logs string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// stop ends the host with SIGTERM, as systemd does, and returns its log.
func (h *host) stop() string {
	h.t.Helper()
	h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			h.t.Errorf("host exited with %v after SIGTERM", err)
		}
	case <-time.After(minWait):
		h.t.Fatalf("host did not exit within %v of SIGTERM", minWait)
	}
	return h.logs.String()
}

// A typo in plugins.<name>.config is the operator's to fix, not a crash:
// the plugin is not restarted, says what is wrong once, and the self-metrics
// and the log point at the config file.
func TestRejectedConfigIsMisconfiguredNotACrashLoop(t *testing.T) {
	h := startHost(t, []string{"good", "typo"}, `
  good: {config: {series: 1}}
  typo: {config: {seris: 3}}
`)
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_misconfigured", "plugin", "typo") != 1 || value(mfs, "plexporter_plugin_up", "plugin", "typo") != 0 {
		t.Fatalf("typo: misconfigured=%v up=%v, want 1 and 0", value(mfs, "plexporter_plugin_misconfigured", "plugin", "typo"), value(mfs, "plexporter_plugin_up", "plugin", "typo"))
	}
	if value(mfs, "plexporter_plugin_misconfigured", "plugin", "good") != 0 || count(mfs, "chaos_value", "plugin", "good") != 1 {
		t.Fatal("the good plugin must run and not be misconfigured")
	}
	// A crash would be restarted after the 1 s backoff, then 2 s: wait past both.
	time.Sleep(3500 * time.Millisecond)
	_, mfs = h.scrape("")
	if n := value(mfs, "plexporter_plugin_restarts_total", "plugin", "typo"); n != 0 {
		t.Errorf("a misconfigured plugin was restarted %v times; it must wait for its settings to change", n)
	}
	logs := h.logs.String()
	said := linesWith(logs, `seris: unknown key`)
	if len(said) != 1 {
		t.Fatalf("the plugin's message must be logged exactly once, got %d lines:\n%s", len(said), strings.Join(said, "\n"))
	}
	line := said[0]
	for _, want := range []string{"level=ERROR", "plugin=typo", `err="seris: unknown key`, "file=" + h.cfgPath, "key=plugins.typo.config", "line=4"} {
		if !strings.Contains(line, want) {
			t.Errorf("the misconfiguration line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "rpc error") || strings.Contains(line, "InvalidArgument") {
		t.Errorf("the plugin's own message must not come wrapped in gRPC's:\n%s", line)
	}
}

// On SIGHUP a section the plugin rejects keeps it running on its old
// settings, like a broken config file does; fixing the section applies it.
func TestSIGHUPWithRejectedSectionKeepsThePluginRunning(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "alpha.pid")
	h := startHost(t, []string{"alpha"}, fmt.Sprintf("  alpha: {config: {series: 2, pid_file: %q}}\n", pidFile))
	pid, _ := readPIDs(t, pidFile)

	h.writeConfig(fmt.Sprintf("  alpha: {config: {seris: 4, pid_file: %q}}\n", pidFile))
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitFor(10*time.Second, "the rejected section reported", func() bool {
		text, mfs := h.scrape("")
		if value(mfs, "plexporter_plugin_up", "plugin", "alpha") != 1 || count(mfs, "chaos_value", "plugin", "alpha") != 2 {
			t.Fatalf("the running plugin was taken down by a section it rejects:\n%s", text)
		}
		return value(mfs, "plexporter_plugin_misconfigured", "plugin", "alpha") == 1
	})
	if !alive(pid) {
		t.Fatal("the instance on the old settings must keep running")
	}
	// The same rejected section again: not retried, not logged again.
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitFor(5*time.Second, "second rescan", func() bool {
		return len(linesWith(h.logs.String(), `msg="rescanning plugins"`)) >= 2
	})
	time.Sleep(500 * time.Millisecond)
	if n := len(linesWith(h.logs.String(), `seris: unknown key`)); n != 1 {
		t.Errorf("the rejection is logged %d times, want once", n)
	}

	h.writeConfig(fmt.Sprintf("  alpha: {config: {series: 4, pid_file: %q}}\n", pidFile))
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitFor(10*time.Second, "the fixed section applied", func() bool {
		_, mfs := h.scrape("")
		return count(mfs, "chaos_value", "plugin", "alpha") == 4 && value(mfs, "plexporter_plugin_misconfigured", "plugin", "alpha") == 0
	})
	h.waitFor(5*time.Second, "the old instance gone", func() bool { return !alive(pid) })
}

// `plexporter plugins` shows the state and the plugin's own message, and a
// one-shot command's stop of every plugin is not an error.
func TestPluginsCommandShowsMisconfiguredAndStopsQuietly(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"alpha", "typo"} {
		os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-"+name))
	}
	cfg := filepath.Join(t.TempDir(), "plexporter.yml")
	os.WriteFile(cfg, []byte("plugins:\n  typo:\n    config: {seris: 1}\n"), 0o644)
	out, err := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+dir, "--config.file="+cfg, "--no-plugin.sandbox", "plugins").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var typo, alpha string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		switch f := strings.Fields(sc.Text()); {
		case len(f) > 0 && f[0] == "typo":
			typo = sc.Text()
		case len(f) > 0 && f[0] == "alpha":
			alpha = sc.Text()
		}
	}
	if f := strings.Fields(typo); len(f) < 3 || f[2] != "misconfigured" || !strings.Contains(typo, `seris: unknown key`) || strings.Contains(typo, "rpc error") {
		t.Errorf("typo line: want STATE misconfigured and the plugin's own message, got %q\n%s", typo, out)
	}
	if f := strings.Fields(alpha); len(f) < 3 || f[2] != "running" {
		t.Errorf("alpha line: %q", alpha)
	}
	errs := linesWith(string(out), "level=ERROR")
	if len(errs) != 1 || !strings.Contains(errs[0], "plugin=typo") {
		t.Errorf("want one ERROR line (the rejected config), not errors for the stop the command asked for:\n%s", strings.Join(errs, "\n"))
	}
}

// Warnings from Configure are logged once per start; sandbox hints the
// manifest does not cover are warned about once.
func TestConfigureWarningsAndSandboxHintDrift(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-hinted"))
	os.WriteFile(filepath.Join(dir, "plexporter-hinted.yaml"), []byte("env: [CHAOS_SANDBOX_HINTS]\npaths:\n  read_only: [/proc]\n"), 0o644)
	t.Setenv("CHAOS_SANDBOX_HINTS", `{"Capabilities": ["CAP_NET_ADMIN"], "ReadOnlyPaths": ["/proc/self/status", "/sys/class/net"]}`)
	pidFile := filepath.Join(t.TempDir(), "hinted.pid")
	h := startHostIn(t, dir, fmt.Sprintf("  hinted: {config: {series: 1, pid_file: %q, warnings: [\"exclude_devices: mlx5_9 does not exist\"]}}\n", pidFile))
	warned := func() []string {
		return linesWith(h.logs.String(), "level=WARN", "plugin=hinted", `warning="exclude_devices: mlx5_9 does not exist"`)
	}
	drift := func() []string { return linesWith(h.logs.String(), "level=WARN", "plugin=hinted", "sandbox hints") }
	if w := warned(); len(w) != 1 || !strings.Contains(w[0], "key=plugins.hinted.config") {
		t.Fatalf("the configuration warning must be logged once, with its key:\n%s", h.logs.String())
	}
	d := drift()
	if len(d) != 1 || !strings.Contains(d[0], "capability CAP_NET_ADMIN") || !strings.Contains(d[0], "paths.read_only /sys/class/net") || strings.Contains(d[0], "/proc/self/status") {
		t.Fatalf("want one drift warning naming CAP_NET_ADMIN and /sys/class/net (but not /proc/self/status, which /proc grants):\n%s", strings.Join(d, "\n"))
	}
	// A restart is a new start: its warnings again, the drift not.
	pid, _ := readPIDs(t, pidFile)
	syscall.Kill(pid, syscall.SIGKILL)
	h.waitFor(5*time.Second, "restart", func() bool { return len(linesWith(h.logs.String(), `msg="plugin started"`, "plugin=hinted")) == 2 })
	if n := len(warned()); n != 2 {
		t.Errorf("configuration warning logged %d times over two starts, want 2", n)
	}
	if n := len(drift()); n != 1 {
		t.Errorf("drift warned %d times, want once", n)
	}
}

// jsonLine is one --log.format=json line: every member in order, so a
// repeated key is seen (encoding/json keeps only the last).
type jsonLine struct {
	raw    string
	keys   []string
	values map[string][]any
}

func parseJSONLog(t *testing.T, logs string) []jsonLine {
	t.Helper()
	var out []jsonLine
	for _, raw := range strings.Split(strings.TrimSpace(logs), "\n") {
		dec := json.NewDecoder(strings.NewReader(raw))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("not a JSON log line: %q", raw)
		}
		l := jsonLine{raw: raw, values: map[string][]any{}}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			l.keys = append(l.keys, tok.(string))
			l.values[tok.(string)] = append(l.values[tok.(string)], v)
		}
		out = append(out, l)
	}
	return out
}

// Every line about a plugin has exactly one plugin key, its name: go-plugin's
// lines (which name the binary under the same key) and a plugin logging
// plugin=rdma included.
func TestJSONLogsNameThePluginOnce(t *testing.T) {
	h := startHost(t, []string{"poser"}, "  poser: {config: {series: 1, log_as: rdma}}\n", "--log.format=json")
	h.scrape("")
	lines := parseJSONLog(t, h.stop())
	seen := map[string]bool{}
	for _, l := range lines {
		plugin := l.values["plugin"]
		if len(plugin) > 1 {
			t.Errorf("%d plugin keys: %s", len(plugin), l.raw)
		}
		msg, _ := l.values["msg"][0].(string)
		if len(plugin) == 1 && plugin[0] != "poser" {
			t.Errorf("plugin = %v, want poser: %s", plugin[0], l.raw)
		}
		switch msg {
		case "waiting for RPC address", "plugin process exited": // go-plugin's own
			if len(plugin) != 1 || l.values["path"] == nil {
				t.Errorf("go-plugin's line must name the plugin once and keep its path: %s", l.raw)
			}
		case "chaos: posing as another plugin": // the plugin's own, relayed
			if len(plugin) != 1 || l.values["reported_plugin"] == nil || l.values["reported_plugin"][0] != "rdma" {
				t.Errorf("a plugin must not pose as another: %s", l.raw)
			}
		case "plugin started": // the supervisor's
			if len(plugin) != 1 {
				t.Errorf("no plugin key: %s", l.raw)
			}
		default:
			continue
		}
		seen[msg] = true
	}
	for _, msg := range []string{"waiting for RPC address", "plugin process exited", "chaos: posing as another plugin", "plugin started"} {
		if !seen[msg] {
			t.Errorf("no %q line in the log", msg)
		}
	}
}

// A stop the host asks for (shutdown, removal on a rescan) is not an error;
// a plugin dying on its own is.
func TestStopsTheHostAsksForAreNotErrors(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "victim.pid")
	h := startHost(t, []string{"alpha", "beta", "victim"}, fmt.Sprintf("  alpha: {config: {series: 1}}\n  victim: {config: {series: 1, pid_file: %q}}\n", pidFile))
	h.scrape("")
	os.Remove(filepath.Join(h.dir, "plexporter-beta"))
	h.waitFor(5*time.Second, "beta stopped", func() bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_plugin_up", "plugin", "beta") == -1
	})
	if errs := linesWith(h.logs.String(), "level=ERROR"); len(errs) != 0 {
		t.Fatalf("a removal the host made logged errors:\n%s", strings.Join(errs, "\n"))
	}

	pid, _ := readPIDs(t, pidFile)
	syscall.Kill(pid, syscall.SIGKILL)
	h.waitFor(5*time.Second, "the crash logged as an error", func() bool {
		return len(linesWith(h.logs.String(), "level=ERROR", "plugin=victim", "plugin down; restarting")) == 1
	})
	h.waitFor(5*time.Second, "victim back", func() bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_plugin_up", "plugin", "victim") == 1
	})
	before := len(linesWith(h.logs.String(), "level=ERROR"))
	logs := h.stop()
	if n := len(linesWith(logs, `msg="plugin process exited"`, "level=INFO")); n < 3 {
		t.Errorf("want the shutdown's exits at INFO for alpha and victim (and beta's removal), got %d:\n%s", n, logs)
	}
	if errs := linesWith(logs, "level=ERROR"); len(errs) != before {
		t.Errorf("shutdown logged errors:\n%s", strings.Join(errs[before:], "\n"))
	}
}

package main

// Tests of the papercuts of issue 13 item 9, on the built binary.

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk/sdktest"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

func TestVersionGoesToStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--version: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "plexporter, version ") || stderr.Len() != 0 {
		t.Fatalf("--version: stdout %q, stderr %q; want the version on stdout only", stdout.String(), stderr.String())
	}
}

func TestBadDurationFlagShowsAGoodOne(t *testing.T) {
	for _, args := range [][]string{{"--scrape.timeout=5"}, {"--plugin.start-timeout=soon"}} {
		out, err := exec.Command(filepath.Join(binDir, "plexporter"), append(args, "--plugin.dir="+t.TempDir(), "metrics")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "want a Go duration such as 500ms, 5s or 1m30s") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+t.TempDir(), "metrics")
	cmd.Env = append(cmd.Environ(), "PLEXPORTER_SCRAPE_TIMEOUT=1m30s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("a good duration from the environment: %v\n%s", err, out)
	}
}

func TestAllowlistNeverHidesHostHealth(t *testing.T) {
	t.Setenv("PLEXPORTER_ENABLED_METRICS", "chaos_value")
	t.Setenv("PLEXPORTER_DISABLED_METRICS", "plexporter_plugin_info")
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 2}}\n")
	_, mfs := h.scrape("")
	for _, name := range []string{"chaos_value", "plexporter_plugin_up", "plexporter_plugin_scrape_success", "plexporter_build_info"} {
		if len(mfs[name].GetMetric()) == 0 {
			t.Errorf("%s missing under an allowlist of chaos_value; families = %v", name, keys(mfs))
		}
	}
	for name := range mfs {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || name == "chaos_shared" {
			t.Errorf("%s is not on the allowlist", name)
		}
	}
	if _, ok := mfs["plexporter_plugin_info"]; ok {
		t.Error("plexporter_plugin_info is on the denylist: an explicit denial still hides a health family")
	}
}

func TestSelectionOfAnUnknownPluginIs400(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"alpha", "broken", "off"} {
		if err := os.Symlink(filepath.Join(binDir, "chaos"), filepath.Join(dir, "plexporter-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "plexporter-broken.yaml"), []byte("capabilties: []\n"), 0o644)
	h := startHostIn(t, dir, "  off: {enabled: false}\n")
	for _, q := range []string{"?collect[]=alpha", "?collect[]=broken", "?exclude[]=off", "?collect[]=alpha&exclude[]=broken"} {
		h.scrape(q) // fails the test unless 200: refused and disabled plugins are known
	}
	for _, q := range []string{"?collect[]=nosuch", "?exclude[]=nosuch", "?collect[]=alpha,nosuch"} {
		resp, err := http.Get(h.url + "/metrics" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "nosuch") || !strings.Contains(string(body), "known plugins: alpha, broken, off") {
			t.Errorf("%s: %d %s; want 400 naming nosuch and the known plugins", q, resp.StatusCode, body)
		}
	}
}

func TestBadListenAddressStartsNoPlugin(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir, marks := t.TempDir(), t.TempDir()
	// A "plugin" that leaves a file behind when it is started.
	script := "#!/bin/sh\ntouch " + filepath.Join(marks, "started") + "\nsleep 5\n"
	if err := os.WriteFile(filepath.Join(dir, "plexporter-marker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{taken.Addr().String(), "127.0.0.1:99999"} {
		out, err := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+dir, "--no-plugin.sandbox", "--web.listen-address="+addr).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "cannot listen") || !strings.Contains(string(out), addr) {
			t.Errorf("%s: %v; want exit 1 with a message naming the address:\n%s", addr, err, out)
		}
		time.Sleep(200 * time.Millisecond) // a plugin the host started would have run by now
		if _, err := os.Stat(filepath.Join(marks, "started")); err == nil {
			t.Fatalf("%s: a plugin was started before the listen address was found bad:\n%s", addr, out)
		}
	}
}

func TestNoPluginIsWarnedAndCanBeUnready(t *testing.T) {
	empty := t.TempDir()
	missing := filepath.Join(empty, "missing")
	addr := freePort(t)
	var logs syncbuf.Buffer
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+empty, "--plugin.dir="+missing, "--plugin.allow-missing-dir", "--no-plugin.sandbox", "--web.listen-address="+addr, "--web.ready-min-plugins=1")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	h := &host{t: t, url: "http://" + addr}
	var code int
	var body []byte
	h.waitFor(10*time.Second, "/ready to answer", func() bool {
		resp, err := http.Get(h.url + "/ready")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		body, _ = io.ReadAll(resp.Body)
		return true
	})
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "0 of 0 plugins running") {
		t.Errorf("/ready with no plugin and --web.ready-min-plugins=1: %d %s", code, body)
	}
	h.waitFor(3*time.Second, "a warning naming each directory", func() bool {
		l := logs.String()
		return len(linesWith(l, "level=WARN", "plugin directory does not exist", "dir="+missing)) == 1 &&
			len(linesWith(l, "level=WARN", "holds no plugin", "dir="+empty)) == 1
	})

	// One running plugin makes it ready; without the flag, none does.
	ok := startHost(t, []string{"alpha"}, "", "--web.ready-min-plugins=1")
	resp, err := http.Get(ok.url + "/ready")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/ready with one plugin running: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestReloadEndpointAndStatusMetrics(t *testing.T) {
	h := startHost(t, []string{"alpha"}, "  alpha: {config: {series: 1}}\n", "--web.enable-lifecycle")
	post := func() (int, string) {
		resp, err := http.Post(h.url+"/-/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, mfs := h.scrape("")
	started := value(mfs, "plexporter_config_last_reload_success_timestamp_seconds")
	if value(mfs, "plexporter_config_last_reload_successful") != 1 || started <= 0 {
		t.Fatalf("after start: successful %v, timestamp %v", value(mfs, "plexporter_config_last_reload_successful"), started)
	}
	resp, err := http.Get(h.url + "/-/reload")
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /-/reload: %v %v; want 405", resp, err)
	}
	resp.Body.Close()

	h.writeConfig("  alpha: {config: {series: 1}, timout: 1s}\n")
	if code, body := post(); code != http.StatusInternalServerError || !strings.Contains(body, `unknown key "timout"`) {
		t.Fatalf("broken config: %d %s; want 500 with the error", code, body)
	}
	_, mfs = h.scrape("")
	if value(mfs, "plexporter_config_last_reload_successful") != 0 || value(mfs, "plexporter_config_last_reload_success_timestamp_seconds") != started || value(mfs, "plexporter_plugin_up", "plugin", "alpha") != 1 {
		t.Fatalf("after a failed reload: successful %v (want 0), timestamp %v (want %v, the last success), alpha up %v",
			value(mfs, "plexporter_config_last_reload_successful"), value(mfs, "plexporter_config_last_reload_success_timestamp_seconds"), started, value(mfs, "plexporter_plugin_up", "plugin", "alpha"))
	}

	h.writeConfig("  alpha: {config: {series: 3}}\n")
	if code, body := post(); code != 200 {
		t.Fatalf("fixed config: %d %s", code, body)
	}
	_, mfs = h.scrape("")
	if value(mfs, "plexporter_config_last_reload_successful") != 1 || value(mfs, "plexporter_config_last_reload_success_timestamp_seconds") <= started || count(mfs, "chaos_value", "plugin", "alpha") != 3 {
		t.Fatalf("after a good reload: successful %v, timestamp %v (started %v), %d alpha series (want 3: the new settings)",
			value(mfs, "plexporter_config_last_reload_successful"), value(mfs, "plexporter_config_last_reload_success_timestamp_seconds"), started, count(mfs, "chaos_value", "plugin", "alpha"))
	}
}

// The host's own output, alone and with a plugin, passes `promtool check
// metrics` without a single finding (lint warnings included, which
// sdktest.Promtool leaves to the caller).
func TestStockOutputHasNoPromtoolFinding(t *testing.T) {
	bin := sdktest.PromtoolBinary(t)
	for name, plugins := range map[string][]string{"no plugin": nil, "chaos plugin": {"alpha"}} {
		h := startHost(t, plugins, "")
		text, _ := h.scrape("")
		cmd := exec.Command(bin, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("%s: promtool check metrics: %v\n%s", name, err, out)
		}
	}
}

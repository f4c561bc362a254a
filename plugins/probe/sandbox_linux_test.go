package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/hosttest"
)

// TestInHostSandbox runs the plugin as the host runs it, as root: in the
// sandbox of its own manifest.
//
// With the shipped manifest (no network) and an HTTPS probe configured: the
// socket is refused, so the probe is not made: no series, a counted probe
// failure, and the log names the grant (README.md, The sandbox).
//
// With the operator's override README.md documents
// (network.inet.tcp_connect to an HTTPS endpoint's port) and an HTTPS and
// an ICMP probe: the granted port is reached and the system's CA
// certificates are readable (the TLS handshake fails on the test
// certificate, which no system root signed, so success is 0, but the probe
// was made), and the ICMP probe is refused by the host's seccomp filter, as
// README.md says: no series, a counted probe failure.
func TestInHostSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	dir := sandboxDir(t)
	https := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer https.Close()
	_, port, _ := net.SplitHostPort(https.Listener.Addr().String())
	checkUp := func(t *testing.T, text string) {
		t.Helper()
		mustContain(t, text, `plexporter_plugin_sandboxed{plugin="probe"} 1`, `plexporter_plugin_up{plugin="probe"} 1`)
	}

	t.Run("shipped manifest", func(t *testing.T) {
		config := fmt.Sprintf(`plugins:
  guest: {enabled: false}
  probe:
    config:
      https_endpoints: ["%s/"]
      probe_interval: 10s
      probe_timeout: 2s
`, https.URL)
		text, logs := runHost(t, dir, config, func(text string) bool {
			return strings.Contains(text, `guest_collection_errors_total{collector="probe"} 1`)
		})
		checkUp(t, text)
		if strings.Contains(text, `probe="https"`) {
			t.Errorf("an HTTPS probe result in a sandbox without a network grant:\n%s", text)
		}
		if !strings.Contains(logs(), "grant network.inet.tcp_connect for this port") {
			t.Error("the host log does not say what the HTTPS probe needs")
		}
	})

	t.Run("operator overrides and probes", func(t *testing.T) {
		config := fmt.Sprintf(`plugins:
  guest: {enabled: false}
  probe:
    config:
      https_endpoints: ["%s/"]
      icmp_targets: [127.0.0.1]
      probe_interval: 10s
      probe_timeout: 2s
    manifest:
      network:
        inet:
          tcp_connect: [%s]
`, https.URL, port)
		text, logs := runHost(t, dir, config, func(text string) bool {
			return strings.Contains(text, `probe_success{probe="https"`)
		})
		checkUp(t, text)
		mustContain(t, text,
			fmt.Sprintf(`probe_success{probe="https",target="%s/"} 0`, https.URL),
			`guest_collection_errors_total{collector="probe"} 1`)
		if strings.Contains(text, `probe="icmp"`) {
			t.Error("an ICMP probe result in the sandbox, whose seccomp filter refuses ICMP sockets: update README.md")
		}
		if !strings.Contains(logs(), "no ICMP socket") {
			t.Error("the host log does not say why the ICMP probe was not made")
		}
	})
}

// TestBesideGuest: guest and probe both write guest_collection_errors_total
// (declared shared by both, plugins/internal/guesterrors), so with both
// running the host exposes guest's collectors and probe's in one family and
// drops neither plugin's series.
func TestBesideGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	dir := sandboxDir(t)
	text, _ := runHost(t, dir, `plugins:
  guest:
    config: {kmsg: false}
  probe:
    config:
      icmp_targets: [127.0.0.1]
      probe_interval: 10s
      probe_timeout: 2s
`, func(text string) bool {
		return strings.Contains(text, `guest_collection_errors_total{collector="probe"} 1`) &&
			strings.Contains(text, `plexporter_plugin_scrape_success{plugin="guest"} 1`)
	})
	mustContain(t, text, `guest_collection_errors_total{collector="stat"} 0`, `guest_collection_errors_total{collector="probe"} 1`)
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "plexporter_dropped_series_total{") && !strings.HasSuffix(l, " 0") {
			t.Errorf("the host dropped series: %s", l)
		}
	}
}

// sandboxDir builds the host and the plugin into a directory the sandbox's
// trust rules accept, with the shipped manifest.
func sandboxDir(t *testing.T) string {
	dir := hosttest.TrustedDir(t, "plexporter-probe-sandbox", "plugins")
	hosttest.Build(t,
		hosttest.Binary{Pkg: "./host", Dir: "../..", Out: filepath.Join(dir, "plexporter")},
		hosttest.Binary{Pkg: "./plugins/probe", Dir: "../..", Out: filepath.Join(dir, "plugins", "plexporter-probe")},
		hosttest.Binary{Pkg: "./plugins/guest", Dir: "../..", Out: filepath.Join(dir, "plugins", "plexporter-guest")})
	hosttest.InstallManifest(t, filepath.Join(dir, "plugins"), "plexporter-probe.yaml", "")
	hosttest.InstallManifest(t, filepath.Join(dir, "plugins"), "../guest/plexporter-guest.yaml", "")
	return dir
}

// runHost starts the host of dir with config, scrapes it until ready says
// the exposition has what the test waits for (60 s at most), stops it and
// returns that exposition and the host's log.
func runHost(t *testing.T, dir, config string, ready func(string) bool) (string, func() string) {
	t.Helper()
	h := hosttest.Start(t, hosttest.Options{
		Ready:     60 * time.Second,
		Binary:    filepath.Join(dir, "plexporter"),
		PluginDir: filepath.Join(dir, "plugins"),
		Config:    config,
		Args: []string{"--path.sysfs=/sys", "--path.procfs=/proc",
			// A grant that connects is refused below Landlock ABI 9 without it
			// (README.md, The sandbox); this machine's kernel may be older.
			"--plugin.allow-any-unix-connect"},
	})
	defer h.Stop()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		text := h.Metrics()
		if ready(text) {
			return text, h.Logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 60s:\n%s", text)
		}
	}
}

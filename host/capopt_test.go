package main

// Capabilities outside the known-safe list need the operator's opt-in
// (issue 29): a manifest beside a binary cannot by itself give the plugin
// CAP_SYS_ADMIN. The probe plugin, sandboxed, reports the capability sets it
// got; the same test against a host built with the check off
// (plexporter_no_capability_optin) shows the plugin starting with
// CAP_SYS_ADMIN, so the refusal is the check's doing.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	noOptInHostOnce sync.Once
	noOptInHost     string
	noOptInHostErr  error
)

// buildNoOptInHost builds the host with the capability opt-in check off.
func buildNoOptInHost(t *testing.T) string {
	t.Helper()
	noOptInHostOnce.Do(func() {
		noOptInHost = filepath.Join(binDir, "plexporter-no-capability-optin")
		cmd := exec.Command("go", "build", "-tags", "plexporter_no_capability_optin", "-o", noOptInHost, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			noOptInHostErr = fmt.Errorf("build the host without the opt-in check: %v\n%s", err, out)
		}
	})
	if noOptInHostErr != nil {
		t.Fatal(noOptInHostErr)
	}
	return noOptInHost
}

// CAP_SYS_ADMIN's bit (21) in /proc/self/status's hex sets.
const capSysAdminHex = "0000000000200000"

func TestCapabilityOptIn(t *testing.T) {
	st := newSandboxTree(t)
	sysAdmin := st.probeManifest("capabilities: [CAP_SYS_ADMIN]\n")
	st.install(t, "sysadmin", sysAdmin) // no opt-in
	st.install(t, "optedin", sysAdmin)  // opted in below
	st.install(t, "dacread", st.probeManifest("capabilities: [CAP_DAC_READ_SEARCH]\n"))
	const cfg = "  optedin: {allow_capabilities: [CAP_SYS_ADMIN]}\n"

	h := startSandboxHost(t, st, cfg)
	text, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_refused", "plugin", "sysadmin") != 1 || value(mfs, "plexporter_plugin_up", "plugin", "sysadmin") == 1 {
		t.Errorf("a manifest granting CAP_SYS_ADMIN without the operator's opt-in must be refused:\n%s", text)
	}
	manifestPath := filepath.Join(st.plugins, "plexporter-sysadmin.yaml")
	line := `add "allow_capabilities: [CAP_SYS_ADMIN]" under plugins.sysadmin in ` + h.cfgPath
	for _, want := range []string{"plugin sysadmin", "manifest " + manifestPath, "CAP_SYS_ADMIN (not a known-safe capability)"} {
		if !strings.Contains(h.logs.String(), want) {
			t.Errorf("the refusal must name %q", want)
		}
	}
	// The line, as logfmt quotes it inside the reason.
	if !strings.Contains(strings.ReplaceAll(h.logs.String(), `\"`, `"`), line) {
		t.Errorf("the refusal must give the line to add: %s", line)
	}
	for _, p := range []string{"optedin", "dacread"} {
		if value(mfs, "plexporter_plugin_up", "plugin", p) != 1 || value(mfs, "plexporter_plugin_sandboxed", "plugin", p) != 1 {
			t.Errorf("%s must run sandboxed:\n%s", p, text)
		}
	}
	_, opted := h.scrape("?collect[]=optedin")
	if value(opted, "probe_capabilities", "set", "CapEff", "hex", capSysAdminHex) != 1 {
		t.Errorf("the opted-in plugin must hold CAP_SYS_ADMIN (and only it):\n%v", opted["probe_capabilities"])
	}

	// With the check off (a test build), the same manifest without the
	// opt-in starts holding CAP_SYS_ADMIN: the refusal above is the check's.
	off := startHostBinary(t, buildNoOptInHost(t), st.plugins, cfg, "--plugin.sandbox")
	_, free := off.scrape("?collect[]=sysadmin")
	if value(free, "plexporter_plugin_up", "plugin", "sysadmin") != 1 || value(free, "probe_capabilities", "set", "CapEff", "hex", capSysAdminHex) != 1 {
		t.Errorf("without the check the plugin must start with CAP_SYS_ADMIN, or this test proves nothing:\n%s", off.logs.String())
	}
}

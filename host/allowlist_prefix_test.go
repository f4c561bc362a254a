package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// With a metric_prefix, --metrics.enabled matches the names an operator
// sees in /metrics, prefix included: the host serves exactly the families
// asked for, from the plugin with the prefix and from the one without.
func TestAllowlistMatchesPrefixedNames(t *testing.T) {
	h := startHost(t, []string{"alpha", "beta"}, `
  alpha: {config: {series: 2, histograms: 1}}
  beta:  {config: {series: 3, histograms: 1}, metric_prefix: "pre_"}
`, "--metrics.enabled=pre_chaos_value,chaos_value_seconds")
	text, mfs := h.scrape("")
	var served []string
	for name := range mfs {
		if !strings.HasPrefix(name, "plexporter_") {
			served = append(served, name)
		}
	}
	slices.Sort(served)
	if want := []string{"chaos_value_seconds", "pre_chaos_value"}; !slices.Equal(served, want) {
		t.Fatalf("families %v, want %v:\n%s", served, want, text)
	}
	if count(mfs, "pre_chaos_value", "plugin", "beta") != 3 || count(mfs, "chaos_value_seconds", "plugin", "alpha") != 1 {
		t.Fatalf("series of the enabled families missing:\n%s", text)
	}
}

// What the plugin sends with a prefix and an allowlist is judged by
// `plexporter plugin check` (allowlist.prefixed): an SDK-built plugin
// collects the families whose exposed names the allowlist selects, and
// nothing for an allowlist of the bare names, which the host would hide.
func TestSDKPluginPushesDownThePrefixedAllowlist(t *testing.T) {
	bin := filepath.Join(binDir, "shipped", "plexporter-rdma")
	out, err := exec.Command(filepath.Join(binDir, "plexporter"), "plugin", "check", "--sandbox=off", "--log.level=error", bin).CombinedOutput()
	line := regexp.MustCompile(`(?m)^(PASS|FAIL|SKIP) allowlist\.prefixed .*$`).Find(out)
	if !strings.HasPrefix(string(line), "PASS") {
		t.Fatalf("plugin check %s (%v): allowlist.prefixed is %q:\n%s", bin, err, line, out)
	}
}

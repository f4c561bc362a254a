package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// launcherCaps are the capabilities the host needs for itself and its
// sandbox launcher, whatever the plugins: sys_admin for each plugin's PID
// namespace, setuid/setgid to the plugin's user, setpcap for the bounding
// set, chown for the socket directory, dac_override for the socket in it,
// kill for a plugin that does not exit.
var launcherCaps = []string{"CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_KILL"}

// unit is a systemd unit's [Service] section: key → values in order.
type unit map[string][]string

func (u unit) get(key string) string {
	if v := u[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (u unit) words(key string) []string {
	var out []string
	for _, v := range u[key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func readUnit(t testing.TB, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", path, line)
			}
			u[k] = append(u[k], v)
		}
	}
	return u
}

// manifestCaps is the union of the capabilities the named plugins'
// manifests grant.
func manifestCaps(t testing.TB, plugins []string) []string {
	t.Helper()
	var caps []string
	for _, p := range plugins {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "plugins", p, "plexporter-"+p+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Capabilities []string `yaml:"capabilities"`
		}
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatalf("plugins/%s manifest: %v", p, err)
		}
		caps = append(caps, m.Capabilities...)
	}
	return caps
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func unitPath(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "systemd", "plexporter.service")
}

// TestUnitVerifies runs systemd-analyze verify on the unit and requires
// silence: it exits 0 even for unknown keys, which it only prints. verify
// insists that ExecStart's binary exists, so it checks a copy whose
// ExecStart names a stand-in executable; everything else is the unit as
// shipped (the install test verifies the installed unit unchanged).
// systemd-analyze security must rate it at most 4.4 ("OK"). It was 4.0
// until the plugins got a cgroup each (Delegate=yes, so no
// ProtectControlGroups=yes: +0.3), IPC and network namespaces of their
// own (RestrictNamespaces= allows ipc and net: +0.2) and a bounded tmpfs
// for each socket directory (mount and umount2 allowed, so @mount is not
// filtered: +0.2; PrivateMounts= keeps those mounts in the unit's own
// namespace): the rating counts what the host may do, and these are what
// confine each plugin further.
func TestUnitVerifies(t *testing.T) {
	needTools(t, "systemd-analyze")
	data, err := os.ReadFile(unitPath(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stand := filepath.Join(dir, "plexporter")
	if err := os.WriteFile(stand, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "ExecStart=/usr/bin/plexporter ", "ExecStart="+stand+" ", 1)
	if text == string(data) {
		t.Fatal("the unit's ExecStart does not start /usr/bin/plexporter")
	}
	copied := filepath.Join(dir, "plexporter.service")
	if err := os.WriteFile(copied, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", copied).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=44", copied).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security rates the unit above 4.4: %v\n%s", err, out)
	}
}

// TestUnitRestrictions checks the unit's decisions: root with a bounding
// set of exactly the launcher's and the shipped manifests' capabilities,
// and none of the restrictions that would break a plugin.
func TestUnitRestrictions(t *testing.T) {
	u := readUnit(t, unitPath(t))
	if user := u.get("User"); user != "" && user != "root" {
		t.Errorf("User=%s: the host must start as root to build the plugins' sandboxes", user)
	}
	want := sortedUnique(append(slices.Clone(launcherCaps), manifestCaps(t, shipped(t))...))
	if got := sortedUnique(u.words("CapabilityBoundingSet")); !slices.Equal(got, want) {
		t.Errorf("CapabilityBoundingSet=%v, want the launcher's and the shipped manifests' %v", got, want)
	}
	if got := sortedUnique(u.words("RestrictAddressFamilies")); !slices.Equal(got, []string{"AF_INET", "AF_INET6", "AF_NETLINK", "AF_UNIX"}) {
		t.Errorf("RestrictAddressFamilies=%v: rdma and ethtool need AF_NETLINK, plugin sockets AF_UNIX, /metrics AF_INET/AF_INET6", got)
	}
	for key, want := range map[string]string{
		"RestrictNamespaces": "pid ipc net", // each plugin's PID, IPC and (no network grant) network namespace
		"ProtectSystem":      "strict",
		"NoNewPrivileges":    "yes",
		"RuntimeDirectory":   "plexporter",
		"PrivateTmp":         "yes",
		"ExecReload":         "/bin/kill -HUP $MAINPID",
		"KillMode":           "mixed",
		"EnvironmentFile":    "-/etc/default/plexporter",
	} {
		if got := u.get(key); got != want {
			t.Errorf("%s=%q, want %q", key, got, want)
		}
	}
	// nvme opens /dev/nvme*: no private /dev, no device allow-list (which
	// ProtectClock= implies).
	for _, key := range []string{"PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "MemoryDenyWriteExecute", "PrivateNetwork", "PrivateUsers"} {
		if v := u.get(key); v != "" && v != "no" {
			t.Errorf("%s=%s would break plugins", key, v)
		}
	}
	if f := u.words("SystemCallFilter"); len(f) > 0 {
		for _, call := range []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp", "mount", "umount2"} {
			if !slices.Contains(f, call) {
				t.Errorf("SystemCallFilter lacks %s, which the sandbox launcher (or the host, for the socket directories' tmpfs) calls", call)
			}
		}
	}
}

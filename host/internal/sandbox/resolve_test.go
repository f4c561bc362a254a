package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

func TestResolveRefusals(t *testing.T) {
	cases := map[string]struct {
		m    manifest.Manifest
		h    Host
		want string
	}{
		"unknown user":          {manifest.Manifest{User: "no-such-user-here"}, Host{}, "no-such-user-here"},
		"unknown group":         {manifest.Manifest{User: "nobody", Group: "no-such-group-here"}, Host{}, "no-such-group-here"},
		"root without flag":     {manifest.Manifest{User: "root", AllowRoot: true}, Host{}, "allow_root"},
		"root without manifest": {manifest.Manifest{User: "root"}, Host{AllowRoot: true}, "allow_root"},
		"unknown capability":    {manifest.Manifest{User: "nobody", Capabilities: []string{"CAP_NO_SUCH"}}, Host{}, "CAP_NO_SUCH"},
	}
	for name, c := range cases {
		if _, _, err := Resolve(&c.m, "/bin/true", "/x/plexporter-x", c.h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, c.want)
		}
	}
}

func TestResolveDefaults(t *testing.T) {
	spec, warnings, err := Resolve(&manifest.Manifest{Limits: manifest.Limits{Memory: "64MiB", Nofile: 128, Pids: 16}}, "/bin/true", "/x/plexporter-x", Host{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.UID == 0 || spec.GID == 0 || spec.MemoryBytes != 64<<20 || spec.Nofile != 128 || !spec.Landlock {
		t.Fatalf("spec = %+v", spec)
	}
	if _, err := lookupUser(DefaultUser); err != nil && !strings.Contains(strings.Join(warnings, "\n"), "nobody") {
		t.Fatalf("falling back to nobody must warn: %v", warnings)
	}
	if strings.Contains(strings.Join(warnings, "\n"), "not enforced") {
		t.Fatalf("a limits warning where the limits are enforced (cgroups): %v", warnings)
	}
	// A manifest without limits gets the defaults.
	spec, _, err = Resolve(&manifest.Manifest{}, "/bin/true", "/x/plexporter-x", Host{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.MemoryBytes != 256<<20 || spec.Pids != DefaultPids || spec.Nofile != DefaultNofile || spec.CPU != DefaultCPU {
		t.Fatalf("defaults: spec = %+v", spec)
	}
}

// Without a cgroup the host says once, not per plugin, which limits are
// not enforced and why.
func TestResolveWarnsOnceWithoutCgroups(t *testing.T) {
	defer func(d func() error) { detectCgroups = d }(detectCgroups)
	detectCgroups = func() error { return errors.New("read-only file system") }
	var all []string
	for range 3 {
		_, w, err := Resolve(&manifest.Manifest{User: "nobody", Limits: manifest.Limits{Pids: 16}}, "/bin/true", "/x/plexporter-x", Host{})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, w...)
	}
	joined := strings.Join(all, "\n")
	if n := strings.Count(joined, "no per-plugin cgroup (read-only file system)"); n != 1 {
		t.Fatalf("%d cgroup warnings in 3 resolves, want 1: %v", n, all)
	}
	for _, what := range []string{"limits.pids", "limits.cpu", "RLIMIT_DATA"} {
		if !strings.Contains(joined, what) {
			t.Errorf("the warning does not name %s: %s", what, joined)
		}
	}
}

// The package's tests never touch the machine's cgroup file system.
func init() { detectCgroups = func() error { return nil } }

// The spec grants what the plugin will read: placeholders become the
// host's roots, plain absolute paths stay as they are.
func TestResolveExpandsPlaceholdersToTheRoots(t *testing.T) {
	m := manifest.Manifest{User: "nobody", Paths: manifest.Paths{
		ReadOnly:  manifest.PathList{"{sysfs}/class/infiniband", "{procfs}/self/net", "/etc/os-release"},
		ReadWrite: manifest.PathList{"{rootfs}/var/lib/x"},
	}}
	h := Host{Roots: manifest.Roots{Sysfs: "/host/sys", Procfs: "/host/proc", Rootfs: "/host/root"}}
	spec, _, err := Resolve(&m, "/bin/true", "/x/plexporter-x", h)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/host/sys/class/infiniband", "/host/proc/self/net", "/etc/os-release"}; !slices.Equal(spec.ReadOnly, want) {
		t.Errorf("ReadOnly = %v, want %v", spec.ReadOnly, want)
	}
	if want := []string{"/host/root/var/lib/x"}; !slices.Equal(spec.ReadWrite, want) {
		t.Errorf("ReadWrite = %v, want %v", spec.ReadWrite, want)
	}
	if spec, _, err := Resolve(&m, "/bin/true", "/x/plexporter-x", Host{}); err != nil || spec.ReadOnly[0] != "/sys/class/infiniband" {
		t.Errorf("default roots: %v, %v", spec, err)
	}
	// A root that is not absolute cannot be granted: the plugin is refused.
	if _, _, err := Resolve(&m, "/bin/true", "/x/plexporter-x", Host{Roots: manifest.Roots{Sysfs: "host/sys"}}); err == nil || !strings.Contains(err.Error(), "--path.sysfs") {
		t.Errorf("relative root: err = %v", err)
	}
}

// A grant below /proc/<pid>/net can never match (measured through the
// launcher on 6.18, docs/design.md): Resolve says so and names the fix; the
// directory itself and other procfs paths are fine.
func TestResolveWarnsAboutGrantsBelowProcNet(t *testing.T) {
	m := manifest.Manifest{User: "nobody", Paths: manifest.Paths{
		ReadOnly: manifest.PathList{"{procfs}/self/net/dev", "{procfs}/net/stat", "{procfs}/self/net", "{procfs}/sys/net/core", "{procfs}/self/mountinfo"},
	}}
	_, warnings, err := Resolve(&m, "/bin/true", "/x/plexporter-x", Host{})
	if err != nil {
		t.Fatal(err)
	}
	var about []string
	for _, w := range warnings {
		if strings.Contains(w, "never matches") {
			about = append(about, w)
			if !strings.Contains(w, "grant the directory") {
				t.Errorf("the warning must say what to grant: %q", w)
			}
		}
	}
	if len(about) != 2 || !strings.Contains(about[0], "/proc/self/net/dev") || !strings.Contains(about[1], "/proc/net/stat") {
		t.Errorf("warnings %q, want one each for /proc/self/net/dev and /proc/net/stat", about)
	}
}

// pid_namespace: host on kernels with and without Landlock's signal scope
// (ABI 6), decided with the ABI injected: a plugin in the host's PID
// namespace that shares its uid with others and cannot be scoped is
// refused, and says why.
func TestResolveHostPIDNamespace(t *testing.T) {
	realABI := landlockABI
	t.Cleanup(func() { landlockABI = realABI })
	host := manifest.PIDNamespaceHost
	cases := []struct {
		name         string
		abi          int
		m            manifest.Manifest
		h            Host
		refusal      []string // each in the error; nil: resolved
		scopeSignals bool
	}{
		{"host, ABI 7, default user", 7, manifest.Manifest{PIDNamespace: host}, Host{}, nil, true},
		{"host, ABI 6, nobody", 6, manifest.Manifest{User: "nobody", PIDNamespace: host}, Host{}, nil, true},
		{"host, ABI 5, default user", 5, manifest.Manifest{PIDNamespace: host}, Host{},
			[]string{`plugin "x"`, "pid_namespace: host", "ABI 5", "ABI 6", `default plugin user "plexporter"`, "a user of its own"}, false},
		{"host, ABI 5, nobody", 5, manifest.Manifest{User: "nobody", PIDNamespace: host}, Host{},
			[]string{"ABI 5", `user "nobody"`, "uid 65534", "other plugins run as by default"}, false},
		{"host, ABI 5, root", 5, manifest.Manifest{User: "root", AllowRoot: true, PIDNamespace: host}, Host{AllowRoot: true},
			[]string{"ABI 5", "uid 0", "root, the host's own"}, false},
		{"host, ABI 5, a user of its own", 5, manifest.Manifest{User: "daemon", PIDNamespace: host}, Host{}, nil, false},
		{"private, ABI 5, default user", 5, manifest.Manifest{PIDNamespace: manifest.PIDNamespacePrivate}, Host{}, nil, false},
		{"default, ABI 1", 1, manifest.Manifest{}, Host{}, nil, false},
	}
	for _, c := range cases {
		landlockABI = func() (int, error) { return c.abi, nil }
		spec, _, err := Resolve(&c.m, "/bin/true", "/x/plexporter-x", c.h)
		if c.refusal != nil {
			if err == nil {
				t.Errorf("%s: resolved (%+v), want a refusal", c.name, spec)
				continue
			}
			for _, want := range c.refusal {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: refusal %q does not say %q", c.name, err, want)
				}
			}
			continue
		}
		if err != nil {
			if strings.Contains(err.Error(), `user "daemon"`) {
				t.Skipf("%s: this system has no daemon user: %v", c.name, err)
			}
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if wantNS := !c.m.PIDNamespace.Host(); spec.PIDNamespace != wantNS || spec.ScopeSignals != c.scopeSignals {
			t.Errorf("%s: PIDNamespace %v, ScopeSignals %v; want %v, %v", c.name, spec.PIDNamespace, spec.ScopeSignals, wantNS, c.scopeSignals)
		}
	}
}

// The launcher holds a spec that needs the signal scope to it: never
// without Landlock, and here (ABI 6 or later, as every machine that runs
// the sandbox tests) with it.
func TestCheckSignalScope(t *testing.T) {
	if err := checkSignalScope(&Spec{}); err != nil {
		t.Errorf("a spec without ScopeSignals: %v", err)
	}
	if err := checkSignalScope(&Spec{ScopeSignals: true}); err == nil || !strings.Contains(err.Error(), "host's PID namespace") {
		t.Errorf("ScopeSignals without Landlock: err = %v, want a refusal", err)
	}
	abi, err := landlockABI()
	if err != nil || abi < abiScopeSignal {
		t.Skipf("Landlock ABI %d (%v): the kernel cannot scope signals", abi, err)
	}
	if err := checkSignalScope(&Spec{ScopeSignals: true, Landlock: true}); err != nil {
		t.Errorf("ScopeSignals with Landlock ABI %d: %v", abi, err)
	}
}

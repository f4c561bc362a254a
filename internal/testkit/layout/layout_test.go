// Package layout checks the module's folder graph (docs/design.md,
// CONTRIBUTING.md): proto ← internal/wire ← sdk ← plugins, and
// internal/wire, internal/guard ← host. Go forbids import cycles between
// packages, not between folders; this test keeps the folders a DAG.
package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/plexporter/plexporter"

// deps maps every package of the module to the module packages it
// depends on, transitively, tests left out (what its build links).
func deps(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	cmd := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module+"/")
		var own []string
		for _, d := range f[1:] {
			if strings.HasPrefix(d, module+"/") {
				own = append(own, strings.TrimPrefix(d, module+"/"))
			}
		}
		m[pkg] = own
	}
	if len(m) < 20 {
		t.Fatalf("go list found %d packages; run from the module", len(m))
	}
	return m
}

func under(pkg string, dirs ...string) bool {
	for _, d := range dirs {
		if pkg == d || strings.HasPrefix(pkg, d+"/") {
			return true
		}
	}
	return false
}

// The rooms and what each may depend on in the module. A package not in
// a room with a rule (plugins, examples, deploy, test, internal/dev,
// internal/testkit: the top of the graph) may depend on anything Go lets
// it.
func TestFolderGraph(t *testing.T) {
	rules := []struct {
		room    []string
		mayUse  []string // rooms, besides its own
		because string
	}{
		{[]string{"proto"}, nil, "the protocol is the bottom of the graph"},
		{[]string{"internal/wire"}, []string{"proto"}, "the batch format sits below the SDK and the host"},
		{[]string{"internal/guard"}, []string{"proto", "internal/wire", "sdk/metricfilter"}, "the guard is the host's, below it"},
		{[]string{"internal/seccomp"}, nil, "a product package with no module dependency"},
		{[]string{"sdk"}, []string{"proto", "internal/wire"}, "the SDK is built on the wire format only (sdk → internal → sdk was a folder cycle)"},
		// Leaves the host and the guard share with plugins: they depend
		// on nothing of the module but the protocol, so using them from
		// below the SDK closes no cycle.
		{[]string{"sdk/metricfilter", "sdk/transport"}, []string{"proto"}, "a leaf the host and the guard use"},
		// sdktest runs a plugin's output through the host's own guard
		// (not a copy of its rules): the top of the SDK, beside plugins.
		{[]string{"sdk/sdktest"}, []string{"sdk", "proto", "internal/wire", "internal/guard"}, "sdktest checks with the host's guard"},
		{[]string{"host"}, []string{"proto", "internal/wire", "internal/guard", "internal/seccomp", "sdk/metricfilter", "sdk/transport"}, "the host writes its own families with internal/wire, never through the SDK"},
	}
	for pkg, ds := range deps(t) {
		// The most specific room's rule applies (sdk/sdktest's, not sdk's).
		best, depth := -1, -1
		for i, r := range rules {
			for _, room := range r.room {
				if under(pkg, room) && strings.Count(room, "/") > depth {
					best, depth = i, strings.Count(room, "/")
				}
			}
		}
		if best >= 0 {
			r := rules[best]
			for _, d := range ds {
				if !under(d, r.room...) && !under(d, r.mayUse...) {
					t.Errorf("%s depends on %s: %s; allowed besides its own folder: %v (see CONTRIBUTING.md)", pkg, d, r.because, r.mayUse)
				}
			}
		}
	}
}

// Package sdk itself is never a dependency of a package under internal/
// but the developer tools and test helpers, which build plugins.
func TestNoInternalImportsSDK(t *testing.T) {
	for pkg, ds := range deps(t) {
		if !under(pkg, "internal") || under(pkg, "internal/dev", "internal/testkit") {
			continue
		}
		for _, d := range ds {
			if d == "sdk" {
				t.Errorf("%s depends on package sdk: a product package under internal/ sits below the SDK (move the code, or the package to internal/dev or internal/testkit)", pkg)
			}
		}
	}
}

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// roleConfig is a role's host config file: where it comes from, the role
// (deploy/roles/<role>) and its text.
type roleConfig struct {
	name, role, text string
}

// roleConfigs are the role examples' config files and the ones in the
// Kubernetes ConfigMaps.
func roleConfigs(t *testing.T) []roleConfig {
	t.Helper()
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "roles", "*", "plexporter.yml"))
	var out []roleConfig
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		out = append(out, roleConfig{rel, filepath.Base(filepath.Dir(f)), string(b)})
	}
	for _, cm := range configMaps(t) {
		out = append(out, roleConfig{"ConfigMap " + cm.Name, strings.TrimPrefix(cm.Name, "plexporter-"), cm.Data["plexporter.yml"]})
	}
	if len(out) < 4 {
		t.Fatalf("want the two roles' config files and ConfigMaps, found %d", len(out))
	}
	return out
}

// enabledPlugins are the shipped plugins a config file leaves on.
func enabledPlugins(t *testing.T, cfg roleConfig) []string {
	t.Helper()
	var f struct {
		Plugins map[string]struct {
			Enabled *bool `yaml:"enabled"`
		} `yaml:"plugins"`
	}
	if err := yaml.Unmarshal([]byte(cfg.text), &f); err != nil {
		t.Fatalf("%s: %v", cfg.name, err)
	}
	var on []string
	for _, p := range shipped(t) {
		if s, ok := f.Plugins[p]; !ok || s.Enabled == nil || *s.Enabled {
			on = append(on, p)
		}
	}
	return on
}

// documentedPlugins is the plugin set a role's README names in bold on
// its first line of prose ("A GPU/RDMA training node: **rdma**, ...").
func documentedPlugins(t *testing.T, role string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "roles", role, "README.md"))
	if err != nil {
		t.Fatalf("role %s has no README: %v", role, err)
	}
	var prose string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			prose = line
			break
		}
	}
	var names []string
	for _, m := range regexp.MustCompile(`\*\*([a-z0-9_-]+)\*\*`).FindAllStringSubmatch(prose, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("deploy/roles/%s/README.md names no plugin in bold on its first line: %q", role, prose)
	}
	slices.Sort(names)
	return names
}

// TestRoleConfigsEnableTheDocumentedPlugins: each role's config file and
// ConfigMap leave on exactly the plugins its README documents, and every
// other shipped plugin off (a plugin the role does not name, left on,
// runs in every pod of the role).
func TestRoleConfigsEnableTheDocumentedPlugins(t *testing.T) {
	for _, cfg := range roleConfigs(t) {
		if got, want := enabledPlugins(t, cfg), documentedPlugins(t, cfg.role); !slices.Equal(got, want) {
			t.Errorf("%s leaves on %v; role %s documents %v", cfg.name, got, cfg.role, want)
		}
	}
}

// TestRoleConfigs runs the packaged host's `plugins` command with every
// role config over the packaged plugins (sandboxed when root): the host's
// strict parser and each plugin's Configure accept it, and exactly the
// plugins the role wants run.
func TestRoleConfigs(t *testing.T) {
	b := packages(t)
	dir := filepath.Join(sharedTempDir(t, "plexporter-roles-"), "plugins")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range shipped(t) {
		install(t, filepath.Join(b.Bin, "plexporter-"+p), filepath.Join(dir, "plexporter-"+p), 0o755)
		install(t, filepath.Join(repoRoot(t), "plugins", p, "plexporter-"+p+".yaml"), filepath.Join(dir, "plexporter-"+p+".yaml"), 0o644)
	}
	for _, cfg := range roleConfigs(t) {
		t.Run(cfg.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "plexporter.yml")
			if err := os.WriteFile(file, []byte(cfg.text), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(filepath.Join(b.Bin, "plexporter"), "--plugin.dir="+dir, "--config.file="+file, "plugins").CombinedOutput()
			if err != nil {
				t.Fatalf("plexporter plugins: %v\n%s", err, out)
			}
			var running []string
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) >= 3 && slices.Contains(shipped(t), f[0]) {
					if f[2] != "running" {
						t.Errorf("plugin %s is %s:\n%s", f[0], f[2], out)
					}
					running = append(running, f[0])
				}
			}
			slices.Sort(running)
			if want := documentedPlugins(t, cfg.role); !slices.Equal(running, want) {
				t.Errorf("plugins running: %v, role %s documents %v\n%s", running, cfg.role, want, out)
			}
		})
	}
}

// install copies src to dst with mode.
func install(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

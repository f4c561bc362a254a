package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/trust"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plexporter.yml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	f, err := Load(writeFile(t, `
plugins:
  rdma:
    timeout: 3s
    metric_prefix: crusoe_vm_
    config:
      exclude_devices: [mlx5_3]
      qp_counters: true
      depth: 3
  nfs:
    enabled: false
    manifest:
      limits: {memory: 32MiB}
`), trust.Policy{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	r := f.Plugins["rdma"]
	if r.Timeout != 3*time.Second || r.MetricPrefix != "crusoe_vm_" || !r.IsEnabled() || f.Plugins["nfs"].IsEnabled() {
		t.Fatalf("%+v", f)
	}
	s, err := r.Struct()
	if err != nil || s.Fields["depth"].GetNumberValue() != 3 || s.Fields["exclude_devices"].GetListValue().Values[0].GetStringValue() != "mlx5_3" {
		t.Fatalf("struct %v %v", s, err)
	}
	if f.Plugins["nfs"].Manifest.Limits.Memory != "32MiB" {
		t.Fatal("manifest override lost")
	}
}

func TestErrors(t *testing.T) {
	cases := map[string]string{
		"plugins:\n  rdma:\n    timeuot: 3s\n":                   `plexporter.yml:3: unknown key "timeuot"`,
		"plugins:\n  rdma:\n    timeout: soon\n":                 "plexporter.yml:3:",
		"plugins:\n  rdma:\n    manifest: {capabilities: [x]}\n": "plugins.rdma.manifest: capabilities",
		"plugin:\n  rdma: {}\n":                                  `unknown key "plugin"`,
		"plugins:\n  rdma:\n    max_series: -1\n":                "plugins.rdma.max_series",
	}
	for in, want := range cases {
		_, err := Load(writeFile(t, in), trust.Policy{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q) = %v, want %q", in, err, want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yml"), trust.Policy{}); err == nil {
		t.Error("missing explicit config file must be an error")
	}
}

// YAML type errors and tabs are said with the file, the line, the key
// and what it takes, not in the parser's words.
func TestYAMLErrorsInPlainWords(t *testing.T) {
	cases := map[string]string{
		"plugins:\n  rdma:\n    max_series: lots\n":           `plexporter.yml:3: plugins.rdma.max_series: got the string "lots", want an integer`,
		"plugins:\n  rdma:\n    enabled: maybe\n":             `plexporter.yml:3: plugins.rdma.enabled: got the string "maybe", want true or false`,
		"plugins:\n  rdma: [a, b]\n":                          `plexporter.yml:2: plugins.rdma: got a list, want a mapping`,
		"plugins:\n  rdma:\n    config: 3\n":                  `plexporter.yml:3: plugins.rdma.config: got the number 3, want a mapping`,
		"plugins:\n  rdma:\n\ttimeout: 3s\n":                  `plexporter.yml:3: timeout: indented with a tab; YAML indents with spaces only`,
		"plugins:\n  rdma:\n    timeout: 3s\n\tenabled: no\n": `plexporter.yml:4: enabled: indented with a tab`,
	}
	for in, want := range cases {
		_, err := Load(writeFile(t, in), trust.Policy{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "!!") || strings.Contains(err.Error(), "cannot start any token") {
			t.Errorf("Load(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestConfigLocation(t *testing.T) {
	path := writeFile(t, `plugins:
  rdma:
    timeout: 3s
    config:
      exclude_devices: [mlx5_3]
  nfs: {config: {}}
  nvme:
    enabled: false
`)
	f, err := Load(path, trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Location{
		"rdma": {File: path, Key: "plugins.rdma.config", Line: 4},
		"nfs":  {File: path, Key: "plugins.nfs.config", Line: 6},
		"nvme": {File: path, Key: "plugins.nvme.config"},
		"none": {File: path, Key: "plugins.none.config"},
	} {
		if got := f.ConfigLocation(name); got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if s := f.ConfigLocation("rdma").String(); s != path+":4: plugins.rdma.config" {
		t.Errorf("String() = %q", s)
	}
	none, _ := Load("", trust.Policy{})
	if s := none.ConfigLocation("rdma").String(); s != "plugins.rdma.config (no --config.file)" {
		t.Errorf("without a file: %q", s)
	}
}

// The config file grants what manifests grant (plugins.<name>.manifest), so
// under the sandbox it obeys the same rules; and it is re-read on every
// rescan, so a FIFO is refused, not waited on.
func TestLoadTrust(t *testing.T) {
	p := writeFile(t, "plugins:\n  x:\n    manifest: {capabilities: [CAP_SYS_ADMIN]}\n")
	if os.Geteuid() == 0 {
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, trust.Policy{Strict: true})
		if err == nil || !strings.Contains(err.Error(), "config file "+p+": file "+p+" is writable by group or others") || !strings.Contains(err.Error(), "chmod go-w "+p) {
			t.Errorf("0666 config file under the strict rules: %v", err)
		}
		if _, err := Load(p, trust.Policy{}); err != nil {
			t.Errorf("without the rules: %v", err)
		}
	}
	fifo := filepath.Join(t.TempDir(), "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(fifo, trust.Policy{}); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("FIFO config file: %v", err)
		}
	case <-time.After(time.Minute): // generous: a loaded machine is slow, a blocked open never ends
		t.Fatal("loading a FIFO config file blocked")
	}
}

func TestBadTimeoutShowsAGoodOne(t *testing.T) {
	for _, v := range []string{"soon", "5", `"5 s"`, "1h30"} {
		_, err := Load(writeFile(t, "plugins:\n  rdma:\n    enabled: true\n    timeout: "+v+"\n"), trust.Policy{})
		if err == nil || !strings.Contains(err.Error(), "plexporter.yml:4: plugins.rdma.timeout") || !strings.Contains(err.Error(), DurationHint) {
			t.Errorf("timeout %s: %v; want the line, the key and %q", v, err, DurationHint)
		}
	}
	if _, err := ParseDuration("1m30s"); err != nil {
		t.Error(err)
	}
}

func TestBlockSyntaxErrorSaysWhereToLook(t *testing.T) {
	// The mistake is on line 4; yaml.v3 reports line 1, where the block starts.
	_, err := Load(writeFile(t, "plugins:\n  rdma:\n    enabled: true\n   timeout: 1s\n"), trust.Policy{})
	if err == nil || !strings.Contains(err.Error(), "plexporter.yml:1:") || !strings.Contains(err.Error(), "at or below it") {
		t.Fatalf("%v; want the reported line and where the mistake really is", err)
	}
	_, err = Load(writeFile(t, "plugins:\n  rdma:\n    a: b: c\n"), trust.Policy{})
	if err == nil || strings.Contains(err.Error(), "at or below") {
		t.Fatalf("%v: an error at its own line needs no hint", err)
	}
}

// A manifest granting a capability outside the known-safe list is refused
// without the operator's opt-in, with a message naming the plugin, the
// manifest, the capability and the exact line to add; with it, it passes.
func TestCapabilityOptIn(t *testing.T) {
	sysAdmin := &manifest.Manifest{Capabilities: []string{"CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH"}}
	const mf = "/usr/lib/plexporter/plugins/plexporter-nvme.yaml"

	path := writeFile(t, "plugins:\n  rdma:\n    timeout: 3s\n")
	f, err := Load(path, trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	err = f.CapabilityOptIn("nvme", mf, sysAdmin)
	if err == nil {
		t.Fatal("CAP_SYS_ADMIN without opt-in must be refused")
	}
	for _, want := range []string{"plugin nvme", "manifest " + mf, "CAP_SYS_ADMIN", `add "allow_capabilities: [CAP_SYS_ADMIN]" under plugins.nvme in ` + path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "CAP_DAC_READ_SEARCH") {
		t.Errorf("CAP_DAC_READ_SEARCH is known-safe without a device grant: %v", err)
	}
	// The line it says to add, added, is accepted.
	f, err = Load(writeFile(t, "plugins:\n  rdma:\n    timeout: 3s\n  nvme:\n    allow_capabilities: [CAP_SYS_ADMIN]\n"), trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CapabilityOptIn("nvme", mf, sysAdmin); err != nil {
		t.Fatalf("opted in, still refused: %v", err)
	}
	if !f.Plugins["nvme"].OnlyOptIn() || f.Plugins["rdma"].OnlyOptIn() {
		t.Error("OnlyOptIn: a section with allow_capabilities alone is consent only")
	}
	// An opt-in for another capability: the line to write lists both, at
	// the line where the key is.
	path = writeFile(t, "plugins:\n  nvme:\n    allow_capabilities: [CAP_BPF]\n")
	f, _ = Load(path, trust.Policy{})
	err = f.CapabilityOptIn("nvme", mf, sysAdmin)
	if err == nil || !strings.Contains(err.Error(), `make line 3 of `+path+` (plugins.nvme.allow_capabilities) read "allow_capabilities: [CAP_BPF, CAP_SYS_ADMIN]"`) {
		t.Errorf("want the line to change: %v", err)
	}
	// Without --config.file: the whole file to write.
	f, _ = Load("", trust.Policy{})
	err = f.CapabilityOptIn("nvme", "", sysAdmin)
	if err == nil || !strings.Contains(err.Error(), "the default manifest") || !strings.Contains(err.Error(), `--config.file naming a file that holds "plugins: {nvme: {allow_capabilities: [CAP_SYS_ADMIN]}}"`) {
		t.Errorf("want the file to write: %v", err)
	}
	// A bad name in the opt-in is an error naming the key.
	if _, err := Load(writeFile(t, "plugins:\n  nvme:\n    allow_capabilities: [sys_admin]\n"), trust.Policy{}); err == nil || !strings.Contains(err.Error(), "plugins.nvme.allow_capabilities") {
		t.Errorf("bad capability name: %v", err)
	}
}

package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	m, err := Parse("x.yaml", []byte(`
description: reads NVMe SMART
user: plexporter
capabilities: [CAP_SYS_ADMIN]
paths:
  read_only: [/sys/class/nvme]
  devices: [/dev/nvme*]
limits: {memory: 64MiB, pids: 16, nofile: 256}
env: [TZ]
`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Capabilities[0] != "CAP_SYS_ADMIN" || m.Paths.Devices[0] != "/dev/nvme*" || m.Limits.Pids != 16 {
		t.Fatalf("%+v", m)
	}
	if n, _ := ParseBytes(m.Limits.Memory); n != 64<<20 {
		t.Fatalf("memory = %d", n)
	}
}

func TestEmptyAndMissing(t *testing.T) {
	if _, err := Parse("e.yaml", nil); err != nil {
		t.Fatalf("empty manifest: %v", err)
	}
	m, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err != nil || m == nil {
		t.Fatalf("missing manifest: %v", err)
	}
}

func TestErrorsNameFileAndLine(t *testing.T) {
	cases := map[string]string{
		"description: x\ncapabilitys: [CAP_BPF]\n":      `m.yaml:2: unknown key "capabilitys"`,
		"paths:\n  read_only: [/a]\n  writable: [/b]\n": `m.yaml:3: unknown key "writable"`,
		"limits:\n  pids: many\n":                       "m.yaml:2:",
		"capabilities: [SYS_ADMIN]\n":                   `capabilities: "SYS_ADMIN"`,
		"paths: {read_only: [relative/path]}\n":         "must be an absolute path",
		"sha256: abc\n":                                 "64 hex digits",
		"limits: {memory: lots}\n":                      "limits.memory",
		"user: [a\n":                                    "m.yaml:",
	}
	for in, want := range cases {
		_, err := Parse("m.yaml", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v, want it to contain %q", in, err, want)
		}
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.yaml")
	if err := os.Mkdir(p, 0o755); err != nil { // a directory cannot be read as a file
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil {
		t.Fatal("want error")
	}
}

func TestMergeOverride(t *testing.T) {
	base := &Manifest{User: "plexporter", Capabilities: []string{"CAP_BPF"}, Limits: Limits{Pids: 8}}
	out := Merge(base, &Manifest{Capabilities: []string{}, Limits: Limits{Nofile: 64}})
	if out.User != "plexporter" || len(out.Capabilities) != 0 || out.Limits.Pids != 8 || out.Limits.Nofile != 64 {
		t.Fatalf("%+v", out)
	}
	if len(base.Capabilities) != 1 {
		t.Fatal("Merge modified its input")
	}
}

func TestUngranted(t *testing.T) {
	m := &Manifest{
		Capabilities: []string{"CAP_SYS_ADMIN"},
		Paths: Paths{
			ReadOnly:  []string{"/sys/class/nvme", "/sys/class/infiniband/*/ports"},
			ReadWrite: []string{"/var/lib/plexporter"},
			Devices:   []string{"/dev/nvme*"},
		},
	}
	got := m.Ungranted([]string{"cap_sys_admin", "CAP_BPF"}, Paths{
		ReadOnly: []string{
			"/sys/class/nvme/nvme0/model",                   // under a granted directory
			"/sys/class/infiniband/mlx5_0/ports/1/counters", // under a glob's match
			"/var/lib/plexporter/state",                     // read_write grants reading
			"/sys/class/nvme-other",                         // a sibling with a common prefix is not under it
		},
		ReadWrite: []string{"/sys/class/nvme"}, // granted read-only only
		Devices:   []string{"/dev/nvme0", "/dev/nvme*", "/dev/infiniband/uverbs0"},
	})
	want := []string{
		"capability CAP_BPF",
		"paths.read_only /sys/class/nvme-other",
		"paths.read_write /sys/class/nvme",
		"paths.devices /dev/infiniband/uverbs0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Ungranted =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := (&Manifest{}).Ungranted(nil, Paths{}); len(got) != 0 {
		t.Errorf("nothing asked, nothing missing: %v", got)
	}
}

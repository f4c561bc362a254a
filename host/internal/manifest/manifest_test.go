package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/trust"
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
	for _, path := range []string{"", filepath.Join(t.TempDir(), "absent.yaml")} {
		m, err := Load(path, trust.Policy{Strict: true})
		if err != nil || m == nil {
			t.Fatalf("missing manifest %q: %v", path, err)
		}
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
	if _, err := Load(p, trust.Policy{}); err == nil || !strings.Contains(err.Error(), "manifest "+p+": ") {
		t.Fatalf("want an error naming the manifest: %v", err)
	}
}

// A FIFO named as a manifest once hung host start: it is refused at once.
func TestLoadRefusesFIFOsAndHugeFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plexporter-x.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(fifo, trust.Policy{}); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("FIFO manifest: %v", err)
		}
	case <-time.After(time.Minute): // generous: a loaded machine is slow, a blocked open never ends
		t.Fatal("loading a FIFO manifest blocked")
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# padding\n"), MaxSize/10+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, trust.Policy{}); err == nil || !strings.Contains(err.Error(), "more than the 1048576") {
		t.Fatalf("oversized manifest: %v", err)
	}
}

// Under a strict policy a manifest anyone could have written grants
// nothing: it is refused, with what to do.
func TestLoadStrictRefusesWritableManifest(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files must be root's for the strict rules to pass")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "plexporter-x.yaml")
	os.WriteFile(p, []byte("capabilities: [CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, CAP_SYS_PTRACE, CAP_KILL]\n"), 0o644)
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, trust.Policy{Strict: true, Override: "--plugin.insecure-permissions"})
	if err == nil || !strings.Contains(err.Error(), "manifest "+p+": file "+p+" is writable by group or others (owner uid 0 (root), mode 0666): run chmod go-w "+p+", or start the host with --plugin.insecure-permissions") {
		t.Fatalf("0666 manifest: %v", err)
	}
	if m, err := Load(p, trust.Policy{}); err != nil || len(m.Capabilities) != 4 {
		t.Fatalf("without the rules it is read: %+v, %v", m, err)
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

func TestPIDNamespace(t *testing.T) {
	cases := []struct {
		in      string
		want    PIDNamespace
		host    bool
		wantErr string // "" for valid
	}{
		{"description: x\n", "", false, ""},
		{"pid_namespace: private\n", PIDNamespacePrivate, false, ""},
		{"pid_namespace: host\n", PIDNamespaceHost, true, ""},
		{"description: x\npid_namespace: Host\n", "", false, `m.yaml:2: pid_namespace: "Host" is not one of private, host`},
		{"pid_namespace: none\n", "", false, `m.yaml:1: pid_namespace: "none" is not one of private, host`},
		{"pid_namespace: \"\"\n", "", false, ""}, // an empty value is the default
		{"description: x\n\npid_namespace: [host]\n", "", false, "m.yaml:3: pid_namespace must be one of private, host"},
		{"pid_namespace: {host: true}\n", "", false, "m.yaml:1: pid_namespace must be one of private, host"},
		{"pid_namespaces: host\n", "", false, `m.yaml:1: unknown key "pid_namespaces"`},
	}
	for _, c := range cases {
		m, err := Parse("m.yaml", []byte(c.in))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Parse(%q) error = %v, want it to contain %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if m.PIDNamespace != c.want || m.PIDNamespace.Host() != c.host {
			t.Errorf("Parse(%q) pid_namespace = %q (host %v), want %q (host %v)", c.in, m.PIDNamespace, m.PIDNamespace.Host(), c.want, c.host)
		}
	}
	// A manifest built in code is checked by Validate as well.
	if err := (&Manifest{PIDNamespace: "shared"}).Validate(); err == nil || !strings.Contains(err.Error(), "private, host") {
		t.Errorf("Validate of pid_namespace shared: %v", err)
	}
	// An operator's override sets it; an override without it keeps the manifest's.
	base := &Manifest{PIDNamespace: PIDNamespaceHost}
	if got := Merge(&Manifest{}, &Manifest{PIDNamespace: PIDNamespaceHost}).PIDNamespace; got != PIDNamespaceHost {
		t.Errorf("override pid_namespace: host: got %q", got)
	}
	if got := Merge(base, &Manifest{Description: "x"}).PIDNamespace; got != PIDNamespaceHost {
		t.Errorf("override without pid_namespace: got %q, want host kept", got)
	}
	if got := Merge(base, &Manifest{PIDNamespace: PIDNamespacePrivate}).PIDNamespace; got != PIDNamespacePrivate {
		t.Errorf("override pid_namespace: private: got %q", got)
	}
}

// Capabilities outside the known-safe list need the operator's opt-in; a
// known-safe one needs it too where its condition fails.
func TestOptInsMissing(t *testing.T) {
	names := func(o []OptIn) string {
		var s []string
		for _, x := range o {
			s = append(s, x.Capability)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		m       Manifest
		allowed []string
		want    string
	}{
		{Manifest{}, nil, ""},
		{Manifest{Capabilities: []string{"CAP_DAC_READ_SEARCH"}}, nil, ""},
		{Manifest{Capabilities: []string{"CAP_SYS_ADMIN"}}, nil, "CAP_SYS_ADMIN"},
		{Manifest{Capabilities: []string{"CAP_SYS_ADMIN"}}, []string{"CAP_SYS_ADMIN"}, ""},
		{Manifest{Capabilities: []string{"CAP_BPF", "CAP_PERFMON"}}, []string{"CAP_BPF"}, "CAP_PERFMON"},
		{Manifest{Capabilities: []string{"CAP_DAC_OVERRIDE", "CAP_NET_RAW", "CAP_NET_BIND_SERVICE", "CAP_SYSLOG", "CAP_SYS_PTRACE", "CAP_SETUID", "CAP_SYS_MODULE"}}, nil,
			"CAP_DAC_OVERRIDE,CAP_NET_RAW,CAP_NET_BIND_SERVICE,CAP_SYSLOG,CAP_SYS_PTRACE,CAP_SETUID,CAP_SYS_MODULE"},
		// Known-safe only without a device grant: with one it reads the raw device.
		{Manifest{Capabilities: []string{"CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH"}, Paths: Paths{Devices: []string{"/dev/nvme*"}}}, []string{"CAP_SYS_ADMIN"}, "CAP_DAC_READ_SEARCH"},
		{Manifest{Capabilities: []string{"CAP_SYS_ADMIN", "CAP_SYS_ADMIN"}}, nil, "CAP_SYS_ADMIN"},
	} {
		if got := names(c.m.OptInsMissing(c.allowed)); got != c.want {
			t.Errorf("%v allowed %v: %q, want %q", c.m.Capabilities, c.allowed, got, c.want)
		}
	}
	o := (&Manifest{Capabilities: []string{"CAP_DAC_READ_SEARCH"}, Paths: Paths{Devices: []string{"/dev/sda"}}}).OptInsMissing(nil)
	if len(o) != 1 || !strings.Contains(o[0].String(), "paths.devices") {
		t.Errorf("the reason must name the device grant: %v", o)
	}
}

func TestFileSizeLimit(t *testing.T) {
	m, err := Parse("m.yaml", []byte("limits: {file_size: 1GiB}\n"))
	if err != nil || m.Limits.FileSize != "1GiB" {
		t.Fatalf("%v %+v", err, m)
	}
	if _, err := Parse("m.yaml", []byte("limits: {file_size: lots}\n")); err == nil || !strings.Contains(err.Error(), "limits.file_size") {
		t.Errorf("a bad file_size must be refused naming the key: %v", err)
	}
	if got := Merge(m, &Manifest{Limits: Limits{FileSize: "2MiB"}}); got.Limits.FileSize != "2MiB" {
		t.Errorf("override: %q", got.Limits.FileSize)
	}
}

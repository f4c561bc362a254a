package manifest

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPlaceholdersExpandToTheRoots(t *testing.T) {
	m, err := Parse("m.yaml", []byte(`
paths:
  read_only: ["{sysfs}/class/infiniband", "{procfs}/self/net", "{rootfs}", /etc/os-release]
  read_write: ["{rootfs}/var/lib/x"]
  devices: [/dev/nvme*]
network:
  unix: ["{rootfs}/run/x.sock"]
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Expand(Roots{Sysfs: "/host/sys", Procfs: "/host/proc", Rootfs: "/host/root"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want []string }{
		{got.Paths.ReadOnly, []string{"/host/sys/class/infiniband", "/host/proc/self/net", "/host/root", "/etc/os-release"}},
		{got.Paths.ReadWrite, []string{"/host/root/var/lib/x"}},
		{got.Paths.Devices, []string{"/dev/nvme*"}},
		{got.Network.Unix, []string{"/host/root/run/x.sock"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("expanded %v, want %v", c.got, c.want)
		}
	}
	if m.Paths.ReadOnly[0] != "{sysfs}/class/infiniband" || m.Network.Unix[0] != "{rootfs}/run/x.sock" {
		t.Errorf("Expand changed the manifest it was called on: %+v", m)
	}
	// Empty roots are the defaults: a host on the node itself.
	def, err := m.Expand(Roots{})
	if err != nil || def.Paths.ReadOnly[0] != "/sys/class/infiniband" || def.Paths.ReadOnly[2] != "/" {
		t.Errorf("default roots: %v, %v", def.Paths.ReadOnly, err)
	}
}

func TestPlaceholderErrorsNameFileAndLine(t *testing.T) {
	cases := map[string]string{
		"paths:\n  read_only:\n    - /sys/devices\n    - \"{sysf}/class\"\n": `m.yaml:4: "{sysf}/class": unknown placeholder {sysf} (known: {sysfs}, {procfs}, {rootfs})`,
		"paths:\n  devices: [\"{dev}/nvme*\"]\n":                             `m.yaml:2: "{dev}/nvme*": unknown placeholder {dev}`,
		"paths:\n  read_write: [\"{sysfs}class\"]\n":                         `m.yaml:2: "{sysfs}class": a placeholder must be followed by /`,
		"paths:\n  read_only: [\"{sysfs\"]\n":                                `m.yaml:2: "{sysfs": unknown placeholder`,
		"network:\n  unix:\n    - run/x.sock\n":                              `m.yaml:3: "run/x.sock" must be an absolute path or start with one of {sysfs}, {procfs}, {rootfs}`,
	}
	for in, want := range cases {
		_, err := Parse("m.yaml", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v, want it to contain %q", in, err, want)
		}
	}
	// The config file's manifest overrides decode the same types, so they
	// get the line in that file.
	var cfg struct {
		Plugins map[string]struct {
			Manifest *Manifest `yaml:"manifest"`
		} `yaml:"plugins"`
	}
	err := yaml.Unmarshal([]byte("plugins:\n  rdma:\n    manifest:\n      paths: {read_only: [\"{sysfss}/x\"]}\n"), &cfg)
	if err == nil || !strings.Contains(YAMLError("plexporter.yml", err).Error(), `plexporter.yml:4: "{sysfss}/x": unknown placeholder`) {
		t.Errorf("override error = %v", err)
	}
	// Validate, for manifests built in code, says the same without a line.
	if err := (&Manifest{Paths: Paths{ReadOnly: PathList{"{nope}/x"}}}).Validate(); err == nil || !strings.Contains(err.Error(), "paths.read_only: \"{nope}/x\": unknown placeholder") {
		t.Errorf("Validate = %v", err)
	}
}

func TestExpandRefusesRelativeRoots(t *testing.T) {
	m := &Manifest{Paths: Paths{ReadOnly: PathList{"{sysfs}/class/nvme", "/sys/devices"}}}
	if _, err := m.Expand(Roots{Sysfs: "fixture/sys"}); err == nil || !strings.Contains(err.Error(), `--path.sysfs "fixture/sys" is not an absolute path`) {
		t.Errorf("Expand with a relative root = %v", err)
	}
	// A manifest without placeholders does not care about the roots.
	if _, err := (&Manifest{Paths: Paths{ReadOnly: PathList{"/sys/devices"}}}).Expand(Roots{Sysfs: "rel"}); err != nil {
		t.Errorf("absolute paths must not depend on the roots: %v", err)
	}
}

// A plugin's sandbox hints describe the node itself (/sys/...); a manifest
// granting {sysfs}/... covers them whatever --path.sysfs is.
func TestUngrantedComparesPlaceholdersAtTheDefaultRoots(t *testing.T) {
	m := &Manifest{Paths: Paths{ReadOnly: PathList{"{sysfs}/class/infiniband", "{procfs}/self/net"}}}
	got := m.Ungranted(nil, Paths{ReadOnly: PathList{"/sys/class/infiniband", "/proc/self/net/tcp", "/sys/devices"}})
	if !slices.Equal(got, []string{"paths.read_only /sys/devices"}) {
		t.Errorf("Ungranted = %v", got)
	}
}

// An empty list in an operator's override takes every grant of its kind
// away; it must not read as "not set".
func TestEmptyPathListOverrides(t *testing.T) {
	o, err := Parse("o.yaml", []byte("paths: {read_only: []}\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := Merge(&Manifest{Paths: Paths{ReadOnly: PathList{"{sysfs}/class/nvme"}, Devices: PathList{"/dev/nvme*"}}}, o)
	if m.Paths.ReadOnly == nil || len(m.Paths.ReadOnly) != 0 || len(m.Paths.Devices) != 1 {
		t.Errorf("merged paths = %+v", m.Paths)
	}
}

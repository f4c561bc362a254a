package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table
// and checks where each one lands, and the precedence of the run
// directory's sources: run_dir, the process's ERNIC_RUN_DIR, the env
// file's, the default.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	rootfs := t.TempDir()
	envFile := filepath.Join(rootfs, "etc", "rocm-ernic", "rocm-ernic.env")
	if err := os.MkdirAll(filepath.Dir(envFile), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "ernic.env")
	os.WriteFile(other, []byte("ERNIC_RUN_DIR=/srv/other\n"), 0o644)

	cases := []struct {
		name    string
		raw     map[string]any
		env     string // the process's ERNIC_RUN_DIR
		envFile string // the default env file's content ("" none)
		want    string
	}{
		{"default", nil, "", "", filepath.Join(rootfs, "run/rocm-ernic")},
		{"env file", nil, "", "# rocm-ernic\nERNIC_EXPORTER_PORT=9840\nexport ERNIC_RUN_DIR=\"/var/run/ernic\"\n", filepath.Join(rootfs, "var/run/ernic")},
		{"env file without the key", nil, "", "ERNIC_EXPORTER_PORT=9840\n", filepath.Join(rootfs, "run/rocm-ernic")},
		{"process env wins", nil, "/opt/ernic/run", "ERNIC_RUN_DIR=/var/run/ernic\n", filepath.Join(rootfs, "opt/ernic/run")},
		{"run_dir wins, as given", map[string]any{"run_dir": "/mnt/ernic/"}, "/opt/ernic/run", "ERNIC_RUN_DIR=/var/run/ernic\n", "/mnt/ernic"},
		{"env_file", map[string]any{"env_file": other}, "", "ERNIC_RUN_DIR=/var/run/ernic\n", filepath.Join(rootfs, "srv/other")},
	}
	for _, c := range cases {
		os.Remove(envFile)
		if c.envFile != "" {
			os.WriteFile(envFile, []byte(c.envFile), 0o644)
		}
		p := newPlugin()
		p.getenv = func(k string) string {
			if k == envRunDir {
				return c.env
			}
			return ""
		}
		if err := sdktest.Configure(t, p, c.raw, sdk.Paths{Rootfs: rootfs, Procfs: "/host/proc"}); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if p.runDir != c.want || p.proc.root != "/host/proc" {
			t.Errorf("%s: run dir %s, procfs %s; want %s, /host/proc", c.name, p.runDir, p.proc.root, c.want)
		}
	}
}

// TestConfigureRejects: each bad setting is refused with a message that
// names its key.
func TestConfigureRejects(t *testing.T) {
	unreadable := t.TempDir() // a directory: reading it as the env file fails
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"run_dir": "run/rocm-ernic"}, Key: "run_dir", Detail: "not an absolute path"},
		{Raw: map[string]any{"env_file": "rocm-ernic.env"}, Key: "env_file", Detail: "not an absolute path"},
		{Raw: map[string]any{"env_file": unreadable}, Key: "env_file", Detail: "is a directory"},
		{Raw: map[string]any{"run_dir": 3}, Key: "run_dir", Detail: "string"},
		{Raw: map[string]any{"rundir": "/run/rocm-ernic"}, Key: "rundir", Detail: "unknown key"},
	})
}

func TestEnvFileValue(t *testing.T) {
	for in, want := range map[string]string{
		"ERNIC_RUN_DIR=/a\n":                   "/a",
		"  ERNIC_RUN_DIR = '/b c'  \n":         "/b c",
		"ERNIC_RUN_DIR=/a\nERNIC_RUN_DIR=/b\n": "/b",
		"#ERNIC_RUN_DIR=/a\n":                  "",
		"ERNIC_RUN_DIRX=/a\nXERNIC_RUN_DIR=/b": "",
		"export ERNIC_RUN_DIR=\"/d\"":          "/d",
	} {
		if got := envFileValue([]byte(in), envRunDir); got != want {
			t.Errorf("envFileValue(%q) = %q, want %q", in, got, want)
		}
	}
}

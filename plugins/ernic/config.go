package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Where rocm-ernic keeps its run directory, and how its tools are told
// otherwise: ERNIC_RUN_DIR in their environment or in the env file.
const (
	defaultRunDir = "/run/rocm-ernic"
	defaultEnv    = "/etc/rocm-ernic/rocm-ernic.env"
	envRunDir     = "ERNIC_RUN_DIR"
)

// config is the plugin's section of the host configuration
// (plugins.ernic.config); the json tags are its keys.
type config struct {
	// RunDir is the rocm-ernic run directory as the plugin sees it. Empty:
	// ERNIC_RUN_DIR from the process environment, else from EnvFile, else
	// /run/rocm-ernic, each a path on the node, under the host's rootfs.
	RunDir string `json:"run_dir"`
	// EnvFile is rocm-ernic's environment file as the plugin sees it.
	// Empty: <rootfs>/etc/rocm-ernic/rocm-ernic.env.
	EnvFile string `json:"env_file"`
}

func defaultConfig() config { return config{} }

// validate checks the settings, naming the key of the first bad one.
func (c *config) validate() error {
	if c.RunDir != "" && !filepath.IsAbs(c.RunDir) {
		return fmt.Errorf("run_dir: %q is not an absolute path", c.RunDir)
	}
	if c.EnvFile != "" && !filepath.IsAbs(c.EnvFile) {
		return fmt.Errorf("env_file: %q is not an absolute path", c.EnvFile)
	}
	return nil
}

// resolveRunDir returns the run directory the plugin reads and where the
// choice came from (for the log): the run_dir key, else ERNIC_RUN_DIR from
// the process environment (getenv), else from the env file, else the
// default; the last three are node paths, joined to rootfs. A missing env
// file is normal (rocm-ernic does not need one); an unreadable one is an
// error naming it.
func resolveRunDir(c config, rootfs string, getenv func(string) string) (dir, from string, err error) {
	if c.RunDir != "" {
		return filepath.Clean(c.RunDir), "run_dir", nil
	}
	if v := getenv(envRunDir); v != "" {
		return filepath.Join(rootfs, v), "the environment's " + envRunDir, nil
	}
	envFile := c.EnvFile
	if envFile == "" {
		envFile = filepath.Join(rootfs, defaultEnv)
	}
	data, err := os.ReadFile(envFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", "", fmt.Errorf("env_file: %w (set run_dir to skip it)", err)
	default:
		if v := envFileValue(data, envRunDir); v != "" {
			return filepath.Join(rootfs, v), envFile, nil
		}
	}
	return filepath.Join(rootfs, defaultRunDir), "the default", nil
}

// envFileValue returns the last assignment to key in a shell-style
// environment file (the systemd EnvironmentFile subset rocm-ernic's
// scripts source): KEY=value lines, optional "export ", # comments,
// one pair of matching quotes around the value.
func envFileValue(data []byte, key string) string {
	var val string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		val = v
	}
	return val
}

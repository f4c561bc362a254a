package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
)

// defaultOperations is the tracked per-op set, exported even at zero.
var defaultOperations = []string{
	"read", "write", "getattr", "lookup", "access", "create", "remove", "rename", "commit",
	"readdir", "readdirplus", "null", "fsstat", "fsinfo", "pathconf",
}

// config is the plugin's section of the host configuration
// (plugins.nfs.config); the json tags are its keys.
type config struct {
	// MountstatsPath defaults to <procfs>/self/mountstats.
	MountstatsPath string `json:"mountstats_path"`
	// NetDir holds tcp and tcp6; defaults to the net/ directory next to
	// mountstats (<procfs>/self/net, /proc/1/net), i.e. the same namespace.
	NetDir string `json:"net_dir"`
	// VolumeIDRegex is applied to the export path (after "server:").
	VolumeIDRegex string `json:"volume_id_regex"`
	// Operations is the tracked per-op set (case-insensitive).
	Operations []string `json:"operations"`
	// ServerPort is the NFS port when a mount has no port= option.
	ServerPort uint64 `json:"server_port"`
}

// defaultConfig returns the settings of an empty section. The two paths
// depend on the host's procfs root and are filled in by Configure.
func defaultConfig() config {
	return config{
		VolumeIDRegex: nfsvolume.DefaultRegex,
		Operations:    slices.Clone(defaultOperations), // Decode writes into the slice
		ServerPort:    2049,
	}
}

// validate checks the settings, naming the key of the first bad one, and
// normalises Operations to the lower-case names without duplicates that
// Collect exports.
func (c *config) validate() error {
	if _, err := regexp.Compile(c.VolumeIDRegex); err != nil {
		return fmt.Errorf("volume_id_regex: %w", err)
	}
	if c.ServerPort == 0 || c.ServerPort > 65535 {
		return fmt.Errorf("server_port: %d is not a port", c.ServerPort)
	}
	ops := make([]string, 0, len(c.Operations))
	for i, o := range c.Operations {
		o = strings.ToLower(strings.TrimSpace(o))
		if o == "" {
			return fmt.Errorf("operations[%d]: empty operation name", i)
		}
		if !slices.Contains(ops, o) {
			ops = append(ops, o)
		}
	}
	c.Operations = ops
	return nil
}

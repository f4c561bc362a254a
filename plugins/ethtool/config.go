package main

import (
	"fmt"
	"regexp"
)

// defaultMaxDriverStatsPerNetdev caps driver_stats series per netdev: mlx5
// prints hundreds of statistics per port, thousands with many channels.
const defaultMaxDriverStatsPerNetdev = 1000

// config is the plugin's section of the host configuration
// (plugins.ethtool.config); the json tags are its keys. Booleans whose
// default is true are pointers, so that an absent key and false differ.
type config struct {
	// RDMA enables the rdma_* families for netdevs of RDMA Ethernet ports.
	RDMA *bool `json:"rdma"`
	// Include / Exclude select netdevs for the ethtool_* families (Go regexps
	// matched against the whole name when anchored; empty = no filter).
	Include string `json:"include"`
	Exclude string `json:"exclude"`
	// RequireDevice keeps only netdevs with a class/net/<if>/device link.
	RequireDevice *bool `json:"require_device"`
	// StandardStats reads the kernel's standard statistics through ethtool
	// netlink (default on).
	StandardStats *bool `json:"standard_stats"`
	// DriverStats exports every driver statistic (cardinality hazard: off).
	DriverStats             bool   `json:"driver_stats"`
	DriverStatInclude       string `json:"driver_stat_include"`
	DriverStatExclude       string `json:"driver_stat_exclude"`
	MaxDriverStatsPerNetdev int    `json:"max_driver_stats_per_netdev"`

	// The compiled regexps (nil: no filter), set by validate; not keys.
	include, exclude         *regexp.Regexp
	statInclude, statExclude *regexp.Regexp
}

// defaultConfig returns the settings of an empty section.
func defaultConfig() config {
	return config{MaxDriverStatsPerNetdev: defaultMaxDriverStatsPerNetdev}
}

func (c *config) rdma() bool          { return c.RDMA == nil || *c.RDMA }
func (c *config) requireDevice() bool { return c.RequireDevice == nil || *c.RequireDevice }
func (c *config) standardStats() bool { return c.StandardStats == nil || *c.StandardStats }

// validate checks the settings, naming the key of the first bad one, and
// compiles the regular expressions.
func (c *config) validate() error {
	if c.MaxDriverStatsPerNetdev <= 0 {
		return fmt.Errorf("max_driver_stats_per_netdev: must be positive, got %d", c.MaxDriverStatsPerNetdev)
	}
	for _, r := range []struct {
		key, expr string
		dst       **regexp.Regexp
	}{
		{"include", c.Include, &c.include},
		{"exclude", c.Exclude, &c.exclude},
		{"driver_stat_include", c.DriverStatInclude, &c.statInclude},
		{"driver_stat_exclude", c.DriverStatExclude, &c.statExclude},
	} {
		*r.dst = nil
		if r.expr == "" {
			continue
		}
		re, err := regexp.Compile(r.expr)
		if err != nil {
			return fmt.Errorf("%s: %w", r.key, err)
		}
		*r.dst = re
	}
	return nil
}

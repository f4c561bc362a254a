package main

import "fmt"

// config is the plugin's section of the host configuration
// (plugins.rdma.config); the json tags are its keys.
type config struct {
	// ExcludeDevices are RDMA device names (mlx5_3) that are neither read
	// from sysfs nor asked about over netlink.
	ExcludeDevices []string `json:"exclude_devices"`
	// OptionalCounters reads the optional hardware counters the operator
	// enabled (rdma statistic ... set optional-counters) over RDMA netlink.
	// Default true; a pointer so that an absent key and false differ.
	OptionalCounters *bool `json:"optional_counters"`
	// QPCounters reads the per-QP-type counters of auto-mode bound QP
	// counters over RDMA netlink (default false).
	QPCounters bool `json:"qp_counters"`
}

// defaultConfig returns the settings of an empty section.
func defaultConfig() config { return config{} }

func (c *config) optionalCounters() bool { return c.OptionalCounters == nil || *c.OptionalCounters }

// validate checks the settings, naming the key of the first bad one.
func (c *config) validate() error {
	for i, d := range c.ExcludeDevices {
		if d == "" {
			return fmt.Errorf("exclude_devices[%d]: empty device name", i)
		}
	}
	return nil
}

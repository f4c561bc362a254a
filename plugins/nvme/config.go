package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

const (
	defaultSMARTInterval = 5 * time.Minute
	// minimumSMARTInterval keeps a typo ("5s" for "5m") from sending an
	// admin command to every controller several times a minute.
	minimumSMARTInterval = 10 * time.Second
	defaultDevDir        = "/dev"
)

// config is the plugin's section of the host configuration
// (plugins.nvme.config); the json tags are its keys.
type config struct {
	// SMART enables the SMART/Health log poller (default true).
	SMART *bool `json:"smart"`
	// SMARTInterval is how often each controller's log page is read.
	SMARTInterval sdk.Duration `json:"smart_interval"`
	// DevDir holds the controller character devices (nvme0, ...).
	DevDir string `json:"dev_dir"`

	// minInterval is the smallest SMARTInterval validate accepts; not a
	// key. It is minimumSMARTInterval except in tests of the poller.
	minInterval time.Duration
}

// defaultConfig returns the settings of an empty section, with
// minInterval as the floor of smart_interval.
func defaultConfig(minInterval time.Duration) config {
	return config{
		SMARTInterval: sdk.Duration{Duration: defaultSMARTInterval},
		DevDir:        defaultDevDir,
		minInterval:   minInterval,
	}
}

// validate checks the settings, naming the key of the first bad one
// (Config.Decode has refused a smart_interval that is not a duration).
func (c *config) validate() error {
	if iv := c.SMARTInterval.Duration; iv < c.minInterval {
		return fmt.Errorf("smart_interval: %s is below the minimum of %s", iv, c.minInterval)
	}
	if c.DevDir == "" {
		return errors.New("dev_dir: must not be empty")
	}
	return nil
}

// smartEnabled tells whether the SMART poller should run (smart unset
// means true).
func (c *config) smartEnabled() bool { return c.SMART == nil || *c.SMART }

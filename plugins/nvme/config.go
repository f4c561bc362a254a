package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
	SMARTInterval duration `json:"smart_interval"`
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
		SMARTInterval: duration{Duration: defaultSMARTInterval},
		DevDir:        defaultDevDir,
		minInterval:   minInterval,
	}
}

// validate checks the settings, naming the key of the first bad one.
func (c *config) validate() error {
	if c.SMARTInterval.err != nil {
		return fmt.Errorf("smart_interval: %w", c.SMARTInterval.err)
	}
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

// duration is a time span written as a Go duration string ("5m", "90s") or
// a number of seconds. A value that is neither does not fail the decode: it
// is kept in err for validate, which reports it under its key (a decoder
// error from inside a value cannot say which key it came from).
type duration struct {
	time.Duration
	err error
}

func (d *duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	d.Duration, d.err = 0, nil
	switch x := v.(type) {
	case string:
		d.Duration, d.err = time.ParseDuration(x)
	case float64:
		d.Duration = time.Duration(x * float64(time.Second))
	default:
		d.err = fmt.Errorf("%s is neither a duration string like \"5m\" nor a number of seconds", b)
	}
	return nil
}

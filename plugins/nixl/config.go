package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// defaultBucketsUS are NIXL's default histogram upper bounds in µs
// (src/plugins/telemetry/common/histogram_buckets.h).
var defaultBucketsUS = []float64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000, 10000000}

// maxBuckets bounds the per-scrape cost of a custom bucket list; NIXL's
// multi-process exporter has the same cap.
const maxBuckets = 32

// Limits of the timers: a drain interval long enough that an idle plugin
// costs nothing measurable, short enough that a default ring (4095
// events) does not fill between two drains at thousands of events per
// second.
const (
	defaultDrainInterval  = 100 * time.Millisecond // NIXL's flush period
	minDrainInterval      = 10 * time.Millisecond
	maxDrainInterval      = 10 * time.Second
	defaultRescanInterval = time.Second
	defaultStaleAfter     = 5 * time.Minute
)

// defaultTelemetryDir is where the plugin looks when none is configured.
// NIXL has no default (NIXL_TELEMETRY_DIR must be set and exist); /run is
// tmpfs, so a reboot removes the files of dead agents NIXL never deletes,
// and the 100 ms ring updates never reach a disk.
const defaultTelemetryDir = "/run/nixl/telemetry"

// config is the plugin's section of the host configuration
// (plugins.nixl.config); the json tags are its keys.
type config struct {
	// TelemetryDirs are the NIXL_TELEMETRY_DIR values of the host's agents.
	TelemetryDirs []string `json:"telemetry_dirs"`
	// DrainInterval is how often every ring is drained.
	DrainInterval sdk.Duration `json:"drain_interval"`
	// RescanInterval is how often the directories are listed for new and
	// removed files.
	RescanInterval sdk.Duration `json:"rescan_interval"`
	// StaleAfter is how long a ring may stay idle with no process mapping
	// it before the agent's series are dropped.
	StaleAfter sdk.Duration `json:"stale_after"`
	// HistogramBucketsUS overrides the histograms' upper bounds, like
	// NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US.
	HistogramBucketsUS buckets `json:"histogram_buckets_us"`
	// Hostname is the hostname label; default: the host's name.
	Hostname string `json:"hostname"`
	// LivenessCheck asks the kernel whether a process still has an idle
	// ring open before dropping it (liveness.go).
	LivenessCheck *bool `json:"liveness_check"`
}

func defaultConfig() config {
	return config{
		TelemetryDirs:      []string{defaultTelemetryDir},
		DrainInterval:      sdk.Duration{Duration: defaultDrainInterval},
		RescanInterval:     sdk.Duration{Duration: defaultRescanInterval},
		StaleAfter:         sdk.Duration{Duration: defaultStaleAfter},
		HistogramBucketsUS: buckets{bounds: defaultBucketsUS},
	}
}

// validate checks the settings, naming the key of the first bad one, and
// cleans the directory list.
func (c *config) validate() error {
	if len(c.TelemetryDirs) == 0 {
		return fmt.Errorf("telemetry_dirs: empty: name at least one NIXL_TELEMETRY_DIR")
	}
	var dirs []string
	for i, d := range c.TelemetryDirs {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("telemetry_dirs[%d]: empty path", i)
		}
		if !filepath.IsAbs(d) {
			return fmt.Errorf("telemetry_dirs[%d]: %q is not an absolute path", i, d)
		}
		if d = filepath.Clean(d); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	c.TelemetryDirs = dirs
	for _, d := range []struct {
		key      string
		v        sdk.Duration
		min, max time.Duration
	}{
		{"drain_interval", c.DrainInterval, minDrainInterval, maxDrainInterval},
		{"rescan_interval", c.RescanInterval, c.DrainInterval.Duration, time.Hour},
		{"stale_after", c.StaleAfter, c.RescanInterval.Duration, 7 * 24 * time.Hour},
	} {
		switch {
		case d.v.Duration < d.min:
			return fmt.Errorf("%s: %s is below the minimum of %s", d.key, d.v.Duration, d.min)
		case d.v.Duration > d.max:
			return fmt.Errorf("%s: %s is above the maximum of %s", d.key, d.v.Duration, d.max)
		}
	}
	if err := c.HistogramBucketsUS.err; err != nil {
		return fmt.Errorf("histogram_buckets_us: %w", err)
	}
	if strings.ContainsAny(c.Hostname, "\x00\n") {
		return fmt.Errorf("hostname: %q contains a NUL or newline", c.Hostname)
	}
	return nil
}

// livenessCheck tells whether the kernel is asked (unset means true).
func (c *config) livenessCheck() bool { return c.LivenessCheck == nil || *c.LivenessCheck }

// buckets are histogram upper bounds in µs: a list of numbers, or NIXL's
// NIXL_TELEMETRY_HISTOGRAM_BUCKETS_US text ("10, 25.5, 100") so that the
// value an application uses can be copied. Like NIXL, every bound must be
// a finite number above 0 and above the previous one; unlike NIXL's
// silent default for an empty string, an empty list is refused here too
// (leave the key out for the defaults). Errors are kept for validate.
type buckets struct {
	bounds []float64
	err    error
}

func (bk *buckets) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	bk.bounds, bk.err = nil, nil
	var tokens []any
	switch x := v.(type) {
	case string:
		for _, s := range strings.Split(x, ",") {
			tokens = append(tokens, s)
		}
	case []any:
		tokens = x
	default:
		bk.err = fmt.Errorf("%s is neither a list of numbers nor a comma-separated string", b)
		return nil
	}
	bk.bounds, bk.err = parseBounds(tokens)
	return nil
}

func parseBounds(tokens []any) ([]float64, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("empty: leave the key out for NIXL's defaults")
	}
	if len(tokens) > maxBuckets {
		return nil, fmt.Errorf("%d bounds, at most %d", len(tokens), maxBuckets)
	}
	out := make([]float64, 0, len(tokens))
	for i, tok := range tokens {
		var f float64
		switch t := tok.(type) {
		case float64:
			f = t
		case string:
			s := strings.TrimSpace(t)
			var err error
			if f, err = strconv.ParseFloat(s, 64); err != nil || s == "" {
				return nil, fmt.Errorf("bound %d: %q is not a number", i, t)
			}
		default:
			return nil, fmt.Errorf("bound %d: %v is not a number", i, tok)
		}
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return nil, fmt.Errorf("bound %d: %v is not finite", i, f)
		case f <= 0:
			return nil, fmt.Errorf("bound %d: %v is not positive", i, f)
		case i > 0 && f <= out[i-1]:
			return nil, fmt.Errorf("bound %d: %v is not greater than the previous bound %v", i, f, out[i-1])
		}
		out = append(out, f)
	}
	return out, nil
}

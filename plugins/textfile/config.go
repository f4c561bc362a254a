package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

const (
	// defaultDirectory is where the package creates the textfile
	// directory (node_exporter's --collector.textfile.directory has no
	// default; sites commonly use /var/lib/node_exporter/textfile_collector).
	defaultDirectory = "/var/lib/plexporter/textfile"
	// defaultMaxFileBytes bounds one file. A textfile of 100 series is
	// about 5 KB; NCCL Inspector's per-GPU file is 12–24 KB.
	defaultMaxFileBytes = 4 << 20
	// defaultMaxSeriesPerFile bounds what one file may add.
	defaultMaxSeriesPerFile = 10000
	// defaultMaxSeries bounds every file together, below the host's
	// default per-plugin cap of 100000 so that the plugin, not the host,
	// decides which families go (by file order) and says so.
	defaultMaxSeries = 50000
	// maxMaxFileBytes keeps a typo from letting one file take the
	// plugin's whole memory limit.
	maxMaxFileBytes = 64 << 20
)

// config is the plugin's section of the host configuration
// (plugins.textfile.config); the json tags are its keys.
type config struct {
	// Directories are read in this order; within one, files in name
	// order. The first file to expose a family or a series keeps it.
	Directories []string `json:"directories"`
	// MaxFileBytes refuses larger files.
	MaxFileBytes int64 `json:"max_file_bytes"`
	// MaxSeriesPerFile refuses the families of a file past it.
	MaxSeriesPerFile int `json:"max_series_per_file"`
	// MaxSeries refuses the families past it, over all files.
	MaxSeries int `json:"max_series"`
	// MaxAge, when set, drops files whose mtime is older.
	MaxAge sdk.Duration `json:"max_age"`
}

func defaultConfig() config {
	return config{
		Directories:      []string{defaultDirectory},
		MaxFileBytes:     defaultMaxFileBytes,
		MaxSeriesPerFile: defaultMaxSeriesPerFile,
		MaxSeries:        defaultMaxSeries,
	}
}

// validate checks the settings, naming the key of the first bad one, and
// cleans the directory paths.
func (c *config) validate() error {
	if len(c.Directories) == 0 {
		return fmt.Errorf("directories: empty; list at least one directory (the default is %s)", defaultDirectory)
	}
	dirs := make([]string, 0, len(c.Directories))
	for i, d := range c.Directories {
		if d == "" || !filepath.IsAbs(d) {
			return fmt.Errorf("directories[%d]: %q is not an absolute path", i, d)
		}
		d = filepath.Clean(d)
		if slices.Contains(dirs, d) {
			return fmt.Errorf("directories[%d]: %s is listed twice", i, d)
		}
		dirs = append(dirs, d)
	}
	c.Directories = dirs
	if c.MaxFileBytes <= 0 || c.MaxFileBytes > maxMaxFileBytes {
		return fmt.Errorf("max_file_bytes: %d is not between 1 and %d", c.MaxFileBytes, maxMaxFileBytes)
	}
	if c.MaxSeriesPerFile <= 0 {
		return fmt.Errorf("max_series_per_file: %d must be above 0", c.MaxSeriesPerFile)
	}
	if c.MaxSeries <= 0 {
		return fmt.Errorf("max_series: %d must be above 0", c.MaxSeries)
	}
	if c.MaxSeriesPerFile > c.MaxSeries {
		return fmt.Errorf("max_series_per_file: %d is above max_series (%d)", c.MaxSeriesPerFile, c.MaxSeries)
	}
	if d := c.MaxAge.Duration; d < 0 || (d > 0 && d < time.Second) {
		return fmt.Errorf("max_age: %s must be 0 (off) or at least 1s", d)
	}
	return nil
}

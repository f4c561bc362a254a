package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// config is the plugin's section of the host configuration
// (plugins.<name>.config); the json tags are its keys.
type config struct {
	// Library is the collector's shared object, an absolute path. Without
	// it the instance loads nothing and serves only its own counter.
	Library string `json:"library"`
	// Collector is passed to the library's plexporter_collector_configure
	// as JSON, unread by the plugin.
	Collector json.RawMessage `json:"collector"`
}

// validate checks the settings, naming the key of the first bad one.
func (c *config) validate() error {
	if c.Library != "" && !filepath.IsAbs(c.Library) {
		return fmt.Errorf("library: %q is not an absolute path (dlopen would search LD_LIBRARY_PATH and the system's library directories for it)", c.Library)
	}
	if c.Library != "" && filepath.Clean(c.Library) != c.Library {
		return fmt.Errorf("library: %q is not a clean path; write %q", c.Library, filepath.Clean(c.Library))
	}
	if len(c.Collector) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(c.Collector, &obj); err != nil || obj == nil {
			return fmt.Errorf("collector: must be a mapping (it is passed to the library as a JSON object)")
		}
	}
	return nil
}

// collectorJSON is what the library's configure receives.
func (c *config) collectorJSON() string {
	if len(c.Collector) == 0 {
		return "{}"
	}
	return string(c.Collector)
}

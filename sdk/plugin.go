// Package sdk is what a plexporter plugin imports: Serve for its main, the
// Writer that packs samples into batches, and an adapter for existing
// prometheus.Collector code.
//
// A plugin is a small program:
//
//	func main() { sdk.Serve(&myPlugin{}) }
//
// where myPlugin implements Plugin. The SDK owns the handshake with the host,
// logging, panic recovery, deadlines, allowlist pushdown and the lifeline
// (the plugin exits when the host goes away).
package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// Plugin is implemented by every collector plugin. A plugin with background
// work also implements Closer, so Serve can stop it.
type Plugin interface {
	// Info returns the plugin's identity and metric catalogue. It is called
	// before Configure and must not depend on it.
	Info() Info
	// Configure receives the plugin's settings, once per plugin start, before
	// any Collect. An error means the settings cannot work: the host stops the
	// plugin, shows the error's text to the operator as the plugin's own
	// message (so say what is wrong and where: key, path, device) and does not
	// start it again until its settings change. Remarks that do not stop the
	// plugin go to cfg.Warn.
	Configure(ctx context.Context, cfg Config) error
	// Collect writes one scrape's samples. ctx carries the host's deadline.
	// A returned error is reported as a partial failure: samples written
	// before it are kept. Use w.Error for failures that should not stop the
	// rest of the collect.
	Collect(ctx context.Context, w *Writer) error
}

// Closer is implemented by a Plugin that runs background work (a poller, an
// open device or socket) to stop when the host stops it. Serve calls Close
// once, after the host has closed the connection, and waits for it at most
// 2 s before the process exits; its error is not reported. It is not called
// when the host dies: the plugin's whole process group is killed then.
type Closer interface {
	Close() error
}

// Info describes a plugin.
type Info struct {
	Name    string
	Version string
	// Metrics is the catalogue of families the plugin may emit.
	Metrics []*Desc
	// Sandbox lists what the plugin needs (informational; the manifest decides).
	Sandbox SandboxHints
}

// SandboxHints document the privileges a plugin needs.
type SandboxHints struct {
	Capabilities   []string
	ReadOnlyPaths  []string
	ReadWritePaths []string
	Devices        []string
}

// Paths are the filesystem roots a plugin reads kernel state under
// (node_exporter's --path.sysfs, --path.procfs and --path.rootfs).
type Paths struct {
	Sysfs, Procfs, Rootfs string
}

// Config is what the host sends at Configure.
type Config struct {
	// Raw is the plugin's section of the host configuration file.
	Raw *structpb.Struct
	// Paths are the host's filesystem roots, never empty.
	Paths Paths
	// Filter is the host's allowlist; Writer.Enabled applies it.
	Filter *metricfilter.Filter
	// MetricPrefix is prepended to every family name by the Writer.
	MetricPrefix string

	// warnings collects what Warn records, for the ConfigureResponse. It is
	// nil in a Config a test builds itself; Warn logs instead then.
	warnings *[]string
}

// Enabled reports whether the host's allowlist selects the family, as
// Writer.Enabled will at every collect: for work set up at Configure (a
// poller, a device opened) that only some families need.
func (c Config) Enabled(d *Desc) bool { return allowed(c.Filter, c.MetricPrefix, d) }

// AnyEnabled reports whether the allowlist selects any of the families.
func (c Config) AnyEnabled(ds ...*Desc) bool {
	for _, d := range ds {
		if c.Enabled(d) {
			return true
		}
	}
	return false
}

// Warn records a remark about the configuration that does not stop the
// plugin (a deprecated key, a device that is not there yet). The host logs
// it at WARN, once per plugin start, with where the plugin's section of the
// config file is. What the plugin cannot honour is an error from Configure
// instead: the host then keeps the plugin out until its settings change.
func (c Config) Warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if c.warnings == nil {
		logger.Warn(msg)
		return
	}
	*c.warnings = append(*c.warnings, msg)
}

// Decode fills v (a pointer to a struct with json tags) from the plugin's
// configuration section. Unknown keys are errors, so a typo is reported
// instead of silently ignored, and so is a Duration that does not parse,
// under its key. An absent section leaves v untouched.
func (c Config) Decode(v any) error {
	if c.Raw == nil || len(c.Raw.GetFields()) == 0 {
		return nil
	}
	raw, err := c.Raw.MarshalJSON()
	if err != nil {
		return fmt.Errorf("plugin config: %w", err)
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("plugin config: %w", err)
	}
	return durationError(reflect.ValueOf(v), "")
}

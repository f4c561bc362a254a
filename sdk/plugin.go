// Package sdk is what a plexporter plugin imports: Serve for its main, the
// Writer that packs samples into batches, and an adapter for existing
// prometheus.Collector code.
//
// A plugin is a small program:
//
//	func main() { sdk.Serve(newPlugin()) }
//
// where the plugin implements Plugin, and Closer when it runs background
// work. The SDK owns the handshake with the host, logging (Logger), panic
// recovery, deadlines, allowlist pushdown (Writer.Enabled, AnyEnabled) and
// the lifeline (the plugin exits when the host goes away). The allowlist's
// globs match a family's name as exposed, the host's metric_prefix
// included, as the host's own filter does: with metric_prefix "pre_",
// "pre_demo_*" enables Desc "demo_g" and "demo_*" enables nothing. Package sdktest
// runs a plugin over the real gRPC path and through the host's own guard:
// a plugin whose output the host would drop, for breaking a rule below,
// fails its own test.
//
// # Names
//
// The executable is plexporter-<name>, <name> matching ^[a-z0-9][a-z0-9_-]*$;
// Info.Name is <name> and Info.Version is BuildVersion(). Metric names are
// legacy Prometheus names ([a-zA-Z_:][a-zA-Z0-9_:]*), label names
// [a-zA-Z_][a-zA-Z0-9_]* without a "__" prefix; a histogram has no "le"
// label, a summary no "quantile", no family starts with plexporter_, go_ or
// process_ (the host's own), and no family takes another's series names
// (a gauge x_count beside a histogram x). Counters end in _total, and a
// family with a unit ends in it (_bytes, _seconds). Every family is in
// Info.Metrics, a '*' standing for a part named at run time. A family keeps
// one type, help, unit and label set; each series is written once per
// collect.
//
// # Limits
//
// At most 64 label names per family, label values of at most 4096 bytes
// and 100000 series per plugin (the host's defaults; the operator may
// change them). The Writer keeps every message under the host's 4 MiB.
//
// # Configuration and errors
//
// Configure decodes the plugin's section with Config.Decode into a struct
// whose json tags are the keys (an unknown key is an error); time spans are
// Duration; a plugin with no settings refuses any key (CollectorPlugin
// does). Kernel state is read under Config.Paths, never at fixed paths.
// A Configure error starts with the key it is about ("smart_interval: 1s is
// below the minimum of 10s"); remarks that do not stop the plugin go to
// Config.Warn. At collect, Writer.Error reports a source that failed and
// the rest goes on. Messages say what failed and where, lowercase, without
// the plugin's name (the host adds it).
//
// # Manifest and permissions
//
// plexporter-<name>.yaml beside the executable is the sandbox the host runs
// the plugin in: as an unprivileged user (root only when the manifest and
// the host both allow it), with exactly the capabilities,
// paths, devices, netlink protocols and limits it lists (kernel paths with
// the {sysfs}, {procfs} and {rootfs} placeholders for the host's roots).
// Without one the plugin gets no grants. A plugin must work with exactly
// what its manifest grants; Info.Sandbox only documents it (the host warns
// when the two differ).
//
// The wire protocol, the manifest's schema and the conformance checklist
// are in docs/plugin-protocol.md; plugins/README.md is the file layout the
// shipped plugins follow.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

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
	// before it are kept. An error wrapped with Failed fails the whole
	// collect instead (plexporter_plugin_scrape_success 0), the samples
	// written before it still kept. Use w.Error for failures that should not stop the
	// rest of the collect. w is valid until Collect returns: the next
	// Collect reuses its memory, so no goroutine may keep writing to it.
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

// Config is what the host sends at Configure. A test builds one with
// sdktest.Config.
type Config struct {
	// Paths are the host's filesystem roots, never empty.
	Paths Paths
	// Filter is the host's allowlist. Its patterns match the name as
	// exposed, MetricPrefix included: ask Enabled, AnyEnabled or the
	// Writer's Enabled, which prepend it, rather than Filter.Allow(d.Name).
	Filter *metricfilter.Filter
	// MetricPrefix is prepended to every family name by the Writer.
	MetricPrefix string
	// Devices is the host's device filter (--device.include,
	// --device.exclude); nil allows every device. Ask Devices.Allow before
	// touching a device: excluded means not read at all.
	Devices *Devices
	// HostAPIVersion is the protocol version the host implements,
	// MAJOR.MINOR.PATCH. Hosts before 1.2.0 do not say; for them it is
	// "1.0.0", the oldest they can be. What a minor version added to what
	// plugins send (a field, an enum value) is for hosts of that minor or
	// later: an older host drops what it does not know. The SDK's own
	// Writer needs no check today (docs/plugin-protocol.md, Versioning).
	HostAPIVersion string

	// raw is the plugin's section of the host configuration file; Decode
	// reads it.
	raw *structpb.Struct
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
	if c.raw == nil || len(c.raw.GetFields()) == 0 {
		return nil
	}
	raw, err := c.raw.MarshalJSON()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, v)
	}
	return durationError(reflect.ValueOf(v), "")
}

// Failed marks an error Collect returns as the failure of the whole
// collect, not of a part: the SDK sends what was written, then ends the
// stream with a non-OK status (ABORTED, err's text), so the host keeps
// those samples and sets plexporter_plugin_scrape_success to 0. Use it when
// nothing the collect was for could be read (the device, the library, the
// daemon is gone); a source among several that failed is Writer.Error.
func Failed(err error) error {
	if err == nil {
		return nil
	}
	return &failedError{err}
}

type failedError struct{ err error }

func (e *failedError) Error() string { return e.err.Error() }
func (e *failedError) Unwrap() error { return e.err }

// decodeError says what encoding/json found wrong in the plugin's section
// as the package documentation promises: beginning with the key
// ("seris: unknown key ...", "interval: got a number, want a duration such
// as 30s"), not with json's own wording.
func decodeError(err error, v any) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("%s: got %s, want %s", typeErr.Field, jsonValueName(typeErr.Value), wantName(typeErr.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		key, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		msg := key + ": unknown key"
		if keys := structKeys(reflect.TypeOf(v)); len(keys) > 0 {
			msg += " (the keys of this section are " + strings.Join(keys, ", ") + ")"
		}
		return errors.New(msg)
	}
	return fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonValueName is the JSON kind json.UnmarshalTypeError names, in words.
func jsonValueName(v string) string {
	switch {
	case v == "object":
		return "a mapping"
	case v == "array":
		return "a list"
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case v == "number":
		return "a number"
	case strings.HasPrefix(v, "number "): // one out of the type's range
		return strings.TrimPrefix(v, "number ")
	}
	return v
}

// wantName is what a Go type takes, in a config file's words.
func wantName(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer of at least 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return wantName(t.Elem())
	}
	return t.String()
}

// structKeys are the json keys of the struct t points to, sorted.
func structKeys(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" {
			keys = append(keys, structKeys(f.Type)...)
			continue
		}
		if name, ok := jsonKey(f); ok && f.IsExported() {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}

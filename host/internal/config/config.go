// Package config reads the host's optional YAML configuration file
// (--config.file): per-plugin settings and operator overrides of plugin
// manifests. Parsing is strict; errors name file, line and key.
//
//	plugins:
//	  rdma:
//	    enabled: true        # default true
//	    timeout: 3s          # default --scrape.timeout
//	    metric_prefix: ""    # prepended to every family name
//	    max_series: 100000   # default --plugin.max-series
//	    config:              # passed to the plugin's Configure as is
//	      exclude_devices: [mlx5_3]
//	    manifest:            # overrides plexporter-rdma.yaml field by field
//	      limits: {memory: 128MiB}
//	  nvme:
//	    allow_capabilities: [CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH]
//	push:                    # optional: remote write or OTLP (see Push)
//	  url: https://mimir.example/api/v1/push
//
// push: is one mapping (one target) or a list of them (several targets,
// each with every key of the mapping and a name):
//
//	push:
//	  - {name: mimir, url: https://mimir.example/api/v1/push}
//	  - {name: otel, url: http://collector:4318/v1/metrics, protocol: otlp}
//
// allow_capabilities is the operator's opt-in to capabilities the plugin's
// manifest grants beyond the known-safe ones (manifest.SafeCapabilities);
// it grants nothing itself.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/trust"
)

// File is the configuration file.
type File struct {
	Plugins map[string]Plugin `yaml:"plugins"`
	// Push is the push: section when it is one mapping, one target (nil
	// otherwise): the host sends the merged snapshot there
	// (host/internal/push).
	Push *Push `yaml:"-"`
	// PushList is the push: section when it is a list of targets (nil
	// otherwise), each checked as Push is, with unique names, URLs and
	// spool directories.
	PushList []*Push `yaml:"-"`

	path       string
	lines      map[string]int // plugin name → line of its config: key
	allowLines map[string]int // plugin name → line of its allow_capabilities: key
}

// Location says where a plugin's own settings are, for messages about
// them: the file, the plugins.<name>.config key, and its line when the file
// has the key.
type Location struct {
	File string // "" without --config.file
	Key  string
	Line int // 0 when the file has no such key
}

func (l Location) String() string {
	switch {
	case l.File == "":
		return l.Key + " (no --config.file)"
	case l.Line == 0:
		return fmt.Sprintf("%s: %s (not set)", l.File, l.Key)
	}
	return fmt.Sprintf("%s:%d: %s", l.File, l.Line, l.Key)
}

// ConfigLocation returns where plugin's config section is (or would be).
func (f *File) ConfigLocation(plugin string) Location {
	return Location{File: f.path, Key: "plugins." + plugin + ".config", Line: f.lines[plugin]}
}

// Plugin holds one plugin's settings.
type Plugin struct {
	Enabled      *bool              `yaml:"enabled"`
	Timeout      time.Duration      `yaml:"timeout"`
	MetricPrefix string             `yaml:"metric_prefix"`
	MaxSeries    int                `yaml:"max_series"`
	Config       map[string]any     `yaml:"config"`
	Manifest     *manifest.Manifest `yaml:"manifest"`
	// AllowCapabilities is the operator's opt-in to capabilities the
	// plugin's manifest grants that are not known-safe (CAP_SYS_ADMIN,
	// CAP_BPF, ...): without it such a plugin is refused under the sandbox.
	// It grants nothing the manifest does not.
	AllowCapabilities []string `yaml:"allow_capabilities"`
}

// OnlyOptIn reports whether the section sets allow_capabilities and nothing
// else.
func (p Plugin) OnlyOptIn() bool {
	return p.AllowCapabilities != nil && p.Enabled == nil && p.Timeout == 0 && p.MetricPrefix == "" && p.MaxSeries == 0 && p.Config == nil && p.Manifest == nil
}

// IsEnabled reports whether the plugin should run (default true).
func (p Plugin) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Struct converts the plugin's config section for Configure.
func (p Plugin) Struct() (*structpb.Struct, error) {
	if p.Config == nil {
		return nil, nil
	}
	return structpb.NewStruct(normalize(p.Config).(map[string]any))
}

// normalize turns YAML values into what structpb accepts (it wants
// float64, not int, and no time values).
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	default:
		return x
	}
}

// MaxSize is the largest config file read.
const MaxSize = 16 << 20

// Load reads and validates the file at path, as policy requires: it
// overrides manifests, so under the sandbox nobody but root may have
// written it or be able to swap it (trust.Policy); and it is re-read on
// every rescan, so it must be a regular file (of at most MaxSize). An
// empty path yields an empty File.
func Load(path string, policy trust.Policy) (*File, error) {
	f := &File{path: path}
	if path == "" {
		return f, nil
	}
	data, err := policy.ReadFile(path, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	// Durations first: the typed decode's own error for one ("cannot
	// unmarshal !!str `5 s` into time.Duration") gives no example of a
	// good one.
	if err := checkDurations(path, data); err != nil {
		return nil, err
	}
	// push: is a mapping or a list: the file is decoded strictly into the
	// form it has (a custom unmarshaler would lose KnownFields).
	var doc yaml.Node
	var pushNode *yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0 {
		_, pushNode = lookup(doc.Content[0], "push")
	}
	if pushNode != nil && pushNode.Kind == yaml.SequenceNode {
		var v fileWithList
		err = decodeStrict(data, &v)
		v.File.path = path
		*f = v.File
		f.PushList = v.Push
	} else {
		var v fileWithMapping
		err = decodeStrict(data, &v)
		v.File.path = path
		*f = v.File
		f.Push = v.Push
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if plain := plainYAMLError(path, data, err); plain != nil {
			return nil, plain
		}
		return nil, withBlockHint(manifest.YAMLError(path, err))
	}
	f.lines, f.allowLines = configLines(data)
	if f.Push != nil {
		if err := f.Push.check(path, path+": push", pushNode); err != nil {
			return nil, err
		}
	}
	if err := checkPushList(path, f.PushList, pushNode); err != nil {
		return nil, err
	}
	for name, p := range f.Plugins {
		key := fmt.Sprintf("%s: plugins.%s", path, name)
		if p.Timeout < 0 {
			return nil, fmt.Errorf("%s.timeout: must be positive", key)
		}
		if p.MaxSeries < 0 {
			return nil, fmt.Errorf("%s.max_series: must not be negative", key)
		}
		for _, c := range p.AllowCapabilities {
			if err := manifest.CheckCapabilityName(c); err != nil {
				return nil, fmt.Errorf("%s.allow_capabilities: %w", key, err)
			}
		}
		if p.Manifest != nil {
			if err := p.Manifest.Validate(); err != nil {
				return nil, fmt.Errorf("%s.manifest: %w", key, err)
			}
		}
		if _, err := p.Struct(); err != nil {
			return nil, fmt.Errorf("%s.config: %w", key, err)
		}
	}
	return f, nil
}

// fileWithMapping and fileWithList are File as decoded, with push: as
// one mapping or as a list.
type fileWithMapping struct {
	File `yaml:",inline"`
	Push *Push `yaml:"push"`
}

type fileWithList struct {
	File `yaml:",inline"`
	Push []*Push `yaml:"push"`
}

// decodeStrict decodes data into v, unknown keys an error; errors name
// the file's type config.File whichever form v is.
func decodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	var te *yaml.TypeError
	if errors.As(err, &te) {
		r := strings.NewReplacer("config.fileWithMapping", "config.File", "config.fileWithList", "config.File")
		for i, e := range te.Errors {
			te.Errors[i] = r.Replace(e)
		}
	}
	return err
}

// plainYAMLError says in the operator's words what yaml.v3 words as a
// parser: a tab in the indentation ("found character that cannot start
// any token") and a value of the wrong type ("cannot unmarshal !!str
// `lots` into int"), each with the file, the line, the key and what the
// key takes. It returns nil for every other error.
func plainYAMLError(path string, data []byte, err error) error {
	tabby := strings.Contains(err.Error(), "cannot start any token") || strings.Contains(err.Error(), "found a tab")
	for i, line := range strings.Split(string(data), "\n") {
		if !tabby {
			break
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") {
			key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
			return fmt.Errorf("%s:%d: %s: indented with a tab; YAML indents with spaces only (replace the tab with spaces, as many as the keys beside it have)", path, i+1, key)
		}
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return nil
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range te.Errors {
		m := typeErrorLine.FindStringSubmatch(e)
		if m == nil {
			return nil // an unknown key or something else: manifest.YAMLError words it
		}
		line, _ := strconv.Atoi(m[1])
		key := keyAt(doc.Content[0], "", line, m[2])
		if key == "" {
			return nil
		}
		got := map[string]string{"!!str": "the string %q", "!!int": "the number %s", "!!float": "the number %s", "!!bool": "%s", "!!null": "nothing%.0s", "!!seq": "a list%.0s", "!!map": "a mapping%.0s"}[m[2]]
		if got == "" {
			got = m[2] + " %.0s"
		}
		msgs = append(msgs, fmt.Sprintf("%s:%d: %s: got %s, want %s", path, line, key, fmt.Sprintf(got, m[3]), goTypeWords(m[4])))
	}
	return errors.New(strings.Join(msgs, "; "))
}

var typeErrorLine = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")

// keyAt is the dotted key whose value, of YAML tag tag, is on line.
func keyAt(n *yaml.Node, prefix string, line int, tag string) string {
	switch n.Kind {
	case yaml.MappingNode:
		// The deepest first: a list item's key is on the line the list
		// starts on (push:\n  - url: [a]).
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if prefix != "" {
				key = prefix + "." + key
			}
			if found := keyAt(v, key, line, tag); found != "" {
				return found
			}
			if v.Line == line && v.ShortTag() == tag {
				return key
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if found := keyAt(c, fmt.Sprintf("%s[%d]", prefix, i), line, tag); found != "" {
				return found
			}
			if c.Line == line && c.ShortTag() == tag {
				return fmt.Sprintf("%s[%d]", prefix, i)
			}
		}
	}
	return ""
}

// goTypeWords is what a Go type of the config's structs takes, in a
// config file's words.
func goTypeWords(t string) string {
	switch {
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case t == "time.Duration":
		return "a duration: " + DurationHint
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), t == "config.Plugin", t == "config.File", strings.HasPrefix(t, "manifest."):
		return "a mapping"
	case t == "config.Push":
		return "a mapping (one target) or a list of them"
	}
	return t
}

// withBlockHint explains the line of a "did not find expected ..." syntax
// error: yaml.v3 reports it at the line where the enclosing block (mapping
// or sequence) starts, not where the mistake is, and keeps the position of
// the mistake to itself (no API gives it).
func withBlockHint(err error) error {
	if !strings.Contains(err.Error(), ": did not find expected ") {
		return err
	}
	return fmt.Errorf("%w (the line is where the enclosing block starts: the mistake is at or below it, often a key indented differently from the ones before it)", err)
}

// DurationHint ends every error about a duration, flags' and the config
// file's alike.
const DurationHint = "want a Go duration such as 500ms, 5s or 1m30s"

// ParseDuration parses a duration, or says what a good one looks like.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: %s", s, DurationHint)
	}
	return d, nil
}

// checkDurations checks every plugins.<name>.timeout, with its line. A
// file that is not YAML at all is left to the typed decode to report.
func checkDurations(path string, data []byte) error {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	_, plugins := lookup(doc.Content[0], "plugins")
	for i := 0; plugins != nil && i+1 < len(plugins.Content); i += 2 {
		key, v := lookup(plugins.Content[i+1], "timeout")
		if v == nil || v.Kind != yaml.ScalarNode {
			continue // not a scalar: the typed decode says so
		}
		if _, err := ParseDuration(v.Value); err != nil {
			return fmt.Errorf("%s:%d: plugins.%s.timeout: %w", path, key.Line, plugins.Content[i].Value, err)
		}
	}
	return nil
}

// configLines finds the line of every plugins.<name>.config and
// plugins.<name>.allow_capabilities key. The file has been decoded strictly
// already; this second pass over the same bytes only reads positions, which
// the typed decode does not keep.
func configLines(data []byte) (config, allow map[string]int) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil, nil
	}
	config, allow = map[string]int{}, map[string]int{}
	_, plugins := lookup(doc.Content[0], "plugins")
	for i := 0; plugins != nil && i+1 < len(plugins.Content); i += 2 {
		if key, _ := lookup(plugins.Content[i+1], "config"); key != nil {
			config[plugins.Content[i].Value] = key.Line
		}
		if key, _ := lookup(plugins.Content[i+1], "allow_capabilities"); key != nil {
			allow[plugins.Content[i].Value] = key.Line
		}
	}
	return config, allow
}

// CapabilityOptIn refuses (an error) a plugin whose manifest, read from
// manifestFile ("" for the default one) and merged with this file's
// override, grants capabilities that need the operator's opt-in and this
// file's plugins.<plugin>.allow_capabilities does not list; nil otherwise.
// The error names the plugin, the manifest, each capability and the exact
// line that opts in.
func (f *File) CapabilityOptIn(plugin, manifestFile string, m *manifest.Manifest) error {
	pc := f.Plugins[plugin]
	missing := m.OptInsMissing(pc.AllowCapabilities)
	if len(missing) == 0 {
		return nil
	}
	where := "manifest " + manifestFile
	if manifestFile == "" {
		where = "the default manifest"
	}
	if pc.Manifest != nil && pc.Manifest.Capabilities != nil {
		where = fmt.Sprintf("the config file's plugins.%s.manifest override", plugin)
	}
	var caps []string
	for _, o := range missing {
		caps = append(caps, o.String())
	}
	want := slices.Clone(pc.AllowCapabilities)
	for _, o := range missing {
		want = append(want, o.Capability)
	}
	line := "allow_capabilities: [" + strings.Join(want, ", ") + "]"
	var todo string
	switch {
	case f.path == "":
		todo = fmt.Sprintf("start the host with --config.file naming a file that holds %q", fmt.Sprintf("plugins: {%s: {%s}}", plugin, line))
	case f.allowLines[plugin] > 0:
		todo = fmt.Sprintf("make line %d of %s (plugins.%s.allow_capabilities) read %q", f.allowLines[plugin], f.path, plugin, line)
	default:
		todo = fmt.Sprintf("add %q under plugins.%s in %s", line, plugin, f.path)
	}
	them := "it"
	if len(missing) > 1 {
		them = "them"
	}
	return fmt.Errorf("plugin %s: %s grants %s, which only the operator can allow (docs/security.md, capabilities that need the operator's opt-in); to allow %s, %s and reload", plugin, where, strings.Join(caps, ", "), them, todo)
}

// lookup returns the key and value nodes of key in mapping n, or nils.
func lookup(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

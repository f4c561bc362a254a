// Package manifest reads a plugin's sandbox manifest, plexporter-<name>.yaml,
// shipped beside its binary. The manifest says what the plugin may do: the
// identity it runs as, capabilities, paths, limits, environment, and an
// optional checksum pin. Parsing is strict: unknown keys are errors that name
// file and line, because a misspelt privilege must never be silently ignored.
//
// Operators override fields in the host configuration file
// (plugins.<name>.manifest, same schema); see Merge.
package manifest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/plexporter/plexporter/host/internal/trust"
)

// Manifest is the schema of plexporter-<name>.yaml. All keys are optional.
type Manifest struct {
	Description  string   `yaml:"description"`
	User         string   `yaml:"user"`
	Group        string   `yaml:"group"`
	AllowRoot    bool     `yaml:"allow_root"`
	Capabilities []string `yaml:"capabilities"`
	Paths        Paths    `yaml:"paths"`
	Limits       Limits   `yaml:"limits"`
	Env          []string `yaml:"env"`
	SHA256       string   `yaml:"sha256"`
	Network      *Network `yaml:"network"` // nil: no network (see Network)
	// PIDNamespace is the plugin's PID namespace: "" or PIDNamespacePrivate
	// (its own, the default) or PIDNamespaceHost (see PIDNamespace).
	PIDNamespace PIDNamespace `yaml:"pid_namespace"`
}

// PIDNamespace is where a sandboxed plugin's processes live. Private (the
// default) gives each plugin a PID namespace of its own, whose end kills
// everything the plugin started. Host keeps it in the host's, for the few
// kernel interfaces that answer only about processes the caller's
// namespace can see (RDMA netlink's resource dumps: the attribution
// plugin's rdma_qp_owners); docs/security.md says what that costs.
type PIDNamespace string

// The values of pid_namespace.
const (
	PIDNamespacePrivate PIDNamespace = "private"
	PIDNamespaceHost    PIDNamespace = "host"
)

// PIDNamespaces are the values pid_namespace may take.
var PIDNamespaces = []PIDNamespace{PIDNamespacePrivate, PIDNamespaceHost}

// Host reports whether the plugin runs in the host's PID namespace.
func (p PIDNamespace) Host() bool { return p == PIDNamespaceHost }

func (p PIDNamespace) check() error {
	if p == "" || slices.Contains(PIDNamespaces, p) {
		return nil
	}
	return fmt.Errorf("pid_namespace: %q is not one of %s, %s", string(p), PIDNamespacePrivate, PIDNamespaceHost)
}

// UnmarshalYAML checks the value where it is read, so that a wrong one is
// reported with its file and line, like an unknown key.
func (p *PIDNamespace) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: pid_namespace must be one of %s, %s", n.Line, PIDNamespacePrivate, PIDNamespaceHost)}}
	}
	v := PIDNamespace(s)
	if err := v.check(); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*p = v
	return nil
}

// Network is what the plugin may reach over sockets; nil or empty grants
// nothing but the unix socket it serves go-plugin on: no inet or inet6
// socket of any protocol, no netlink, no connect(2) at all.
type Network struct {
	// Netlink protocols the plugin may open, from NetlinkProtocols.
	Netlink []string `yaml:"netlink"`
	// Unix lists the pathname unix sockets (or directories of them) the
	// plugin may connect to.
	Unix PathList `yaml:"unix"`
	// Inet allows IPv4/IPv6 TCP to and on the listed ports and, if UDP is
	// set, UDP to any port; nil allows no IP socket at all.
	Inet *Inet `yaml:"inet"`
}

// Inet is the IP part of a network grant.
type Inet struct {
	TCPConnect []uint16 `yaml:"tcp_connect"`
	TCPBind    []uint16 `yaml:"tcp_bind"`
	UDP        bool     `yaml:"udp"`
}

// NetlinkProtocols are the netlink protocols a manifest may grant: the
// read-mostly families collectors use. The others (audit, netfilter, xfrm,
// uevents, ...) are no collector's business.
var NetlinkProtocols = []string{"route", "generic", "rdma", "sock_diag"}

// Paths the plugin may access (enforced with Landlock by the sandbox).
// Each is absolute or starts with a placeholder for one of the host's
// roots ({sysfs}/class/infiniband; see Roots), expanded when the sandbox
// is resolved.
type Paths struct {
	ReadOnly  PathList `yaml:"read_only"`
	ReadWrite PathList `yaml:"read_write"`
	Devices   PathList `yaml:"devices"`
}

// Limits on the plugin's resources.
type Limits struct {
	Memory string `yaml:"memory"` // e.g. 64MiB
	Pids   int    `yaml:"pids"`
	Nofile int    `yaml:"nofile"`
	// CPU is a quota in CPUs (0.5: half a CPU), enforced by the plugin's
	// cgroup; 0: the default.
	CPU float64 `yaml:"cpu"`
	// FileSize is the largest file the plugin may write (RLIMIT_FSIZE),
	// a size like Memory; "": the default.
	FileSize string `yaml:"file_size"`
}

// MaxSize is the largest manifest read; the shipped ones are well under 1 KiB.
const MaxSize = 1 << 20

// Load reads the manifest at path as policy requires (trust.Policy: under
// the sandbox, nobody but root may have written it or be able to swap it;
// always a regular file of at most MaxSize). No path, or a missing file,
// is not an error: it yields the empty manifest (default identity, no
// privileges).
func Load(path string, policy trust.Policy) (*Manifest, error) {
	if path == "" {
		return &Manifest{}, nil
	}
	data, err := policy.ReadFile(path, MaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return &Manifest{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse decodes and validates a manifest; name is used in error messages.
func Parse(name string, data []byte) (*Manifest, error) {
	m := &Manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(m); err != nil && !errors.Is(err, io.EOF) /* empty file */ {
		return nil, YAMLError(name, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

var yamlLine = regexp.MustCompile(`line (\d+): (?:field (\S+) not found in type \S+|(.*))`)

// YAMLError rewrites a yaml decoding error as "file:line: message" lines,
// naming unknown keys plainly.
func YAMLError(name string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var msgs []string
		for _, e := range te.Errors {
			if m := yamlLine.FindStringSubmatch(e); m != nil {
				if m[2] != "" {
					msgs = append(msgs, fmt.Sprintf("%s:%s: unknown key %q", name, m[1], m[2]))
				} else {
					msgs = append(msgs, fmt.Sprintf("%s:%s: %s", name, m[1], m[3]))
				}
				continue
			}
			msgs = append(msgs, name+": "+e)
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", name, m[1], m[3])
	}
	return fmt.Errorf("%s: %s", name, msg)
}

var capName = regexp.MustCompile(`^CAP_[A-Z_]+$`)

// CheckCapabilityName accepts a capability name as manifests and the
// config file spell it: CAP_ and capitals.
func CheckCapabilityName(c string) error {
	if !capName.MatchString(c) {
		return fmt.Errorf("%q is not a capability name like CAP_SYS_ADMIN", c)
	}
	return nil
}

// Validate checks values that YAML types cannot.
func (m *Manifest) Validate() error {
	if n := m.Network; n != nil {
		for _, p := range n.Netlink {
			if !slices.Contains(NetlinkProtocols, p) {
				return fmt.Errorf("network.netlink: %q is not one of %s", p, strings.Join(NetlinkProtocols, ", "))
			}
		}
		for _, p := range n.Unix {
			if err := checkPath(p); err != nil {
				return fmt.Errorf("network.unix: %w", err)
			}
		}
	}
	if err := m.PIDNamespace.check(); err != nil {
		return err
	}
	for _, c := range m.Capabilities {
		if err := CheckCapabilityName(c); err != nil {
			return fmt.Errorf("capabilities: %w", err)
		}
	}
	for key, list := range map[string][]string{"paths.read_only": m.Paths.ReadOnly, "paths.read_write": m.Paths.ReadWrite, "paths.devices": m.Paths.Devices} {
		for _, p := range list {
			if err := checkPath(p); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if m.SHA256 != "" {
		if b, err := hex.DecodeString(m.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("sha256: %q is not 64 hex digits", m.SHA256)
		}
	}
	if m.Limits.Memory != "" {
		if _, err := ParseBytes(m.Limits.Memory); err != nil {
			return fmt.Errorf("limits.memory: %w", err)
		}
	}
	if m.Limits.FileSize != "" {
		if _, err := ParseBytes(m.Limits.FileSize); err != nil {
			return fmt.Errorf("limits.file_size: %w", err)
		}
	}
	if m.Limits.Pids < 0 || m.Limits.Nofile < 0 || m.Limits.CPU < 0 {
		return errors.New("limits: pids, nofile and cpu must not be negative")
	}
	for _, e := range m.Env {
		if e == "" || strings.ContainsAny(e, "= ") {
			return fmt.Errorf("env: %q is not a variable name", e)
		}
	}
	return nil
}

// ParseBytes parses sizes like 64MiB, 1GiB, 512KiB or a plain byte count.
func ParseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("%q is not a size like 64MiB", s)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q is not a size like 64MiB", s)
}

// Merge returns m with every field the override sets replaced.
func Merge(m, override *Manifest) *Manifest {
	if override == nil {
		return m
	}
	out := *m
	if override.Description != "" {
		out.Description = override.Description
	}
	if override.User != "" {
		out.User = override.User
	}
	if override.Group != "" {
		out.Group = override.Group
	}
	if override.AllowRoot {
		out.AllowRoot = true
	}
	if override.Capabilities != nil {
		out.Capabilities = override.Capabilities
	}
	if override.Paths.ReadOnly != nil {
		out.Paths.ReadOnly = override.Paths.ReadOnly
	}
	if override.Paths.ReadWrite != nil {
		out.Paths.ReadWrite = override.Paths.ReadWrite
	}
	if override.Paths.Devices != nil {
		out.Paths.Devices = override.Paths.Devices
	}
	if override.Limits.Memory != "" {
		out.Limits.Memory = override.Limits.Memory
	}
	if override.Limits.Pids != 0 {
		out.Limits.Pids = override.Limits.Pids
	}
	if override.Limits.Nofile != 0 {
		out.Limits.Nofile = override.Limits.Nofile
	}
	if override.Limits.CPU != 0 {
		out.Limits.CPU = override.Limits.CPU
	}
	if override.Limits.FileSize != "" {
		out.Limits.FileSize = override.Limits.FileSize
	}
	if override.Env != nil {
		out.Env = override.Env
	}
	if override.SHA256 != "" {
		out.SHA256 = override.SHA256
	}
	if override.Network != nil {
		out.Network = override.Network // the whole grant: an operator states it in one place
	}
	if override.PIDNamespace != "" {
		out.PIDNamespace = override.PIDNamespace
	}
	return &out
}

// Ungranted lists what a plugin says it needs (its Info's sandbox hints:
// capabilities and paths) that m does not grant, one phrase each, for a
// warning: a plugin whose manifest lags behind its code fails inside the
// sandbox in ways that are hard to trace to the manifest. A path is granted
// by an equal path, a directory holding it, or a glob matching it; a path
// to read is also granted by read_write. Hints describe a plugin on the
// node itself (/sys/class/infiniband), so both sides are compared with
// their placeholders expanded to DefaultRoots, whatever --path.* says.
func (m *Manifest) Ungranted(capabilities []string, need Paths) []string {
	var out []string
	if e, err := m.Expand(DefaultRoots); err == nil {
		m = e
	}
	if e, err := (&Manifest{Paths: need}).Expand(DefaultRoots); err == nil {
		need = e.Paths
	}
	for _, c := range capabilities {
		if !slices.ContainsFunc(m.Capabilities, func(g string) bool { return strings.EqualFold(g, c) }) {
			out = append(out, "capability "+c)
		}
	}
	check := func(key string, paths []string, granted ...[]string) {
		for _, p := range paths {
			if !slices.ContainsFunc(slices.Concat(granted...), func(g string) bool { return covers(g, p) }) {
				out = append(out, key+" "+p)
			}
		}
	}
	check("paths.read_only", need.ReadOnly, m.Paths.ReadOnly, m.Paths.ReadWrite)
	check("paths.read_write", need.ReadWrite, m.Paths.ReadWrite)
	check("paths.devices", need.Devices, m.Paths.Devices)
	return out
}

// covers reports whether the granted path or glob g covers path p: p or a
// directory holding it is g, or matches it (a glob grants what it expands
// to, and a granted directory everything under it).
func covers(g, p string) bool {
	g = filepath.Clean(g)
	for q := filepath.Clean(p); ; q = filepath.Dir(q) {
		if ok, _ := filepath.Match(g, q); ok {
			return true
		}
		if q == "/" || q == "." {
			return false
		}
	}
}

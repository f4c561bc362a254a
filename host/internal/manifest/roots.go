package manifest

import (
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Roots are where the host sees the node's file systems: its --path.sysfs,
// --path.procfs and --path.rootfs. A manifest names its paths relative to
// them with placeholders ({sysfs}/class/infiniband, {procfs}/self/net), so
// that the grants follow the roots: in a container, where the node's /sys
// is mounted at /host/sys, the plugin reads /host/sys/class/infiniband and
// its sandbox grants exactly that. An empty field is the default root.
type Roots struct {
	Sysfs, Procfs, Rootfs string
}

// DefaultRoots are the roots of a host that runs on the node itself.
var DefaultRoots = Roots{Sysfs: "/sys", Procfs: "/proc", Rootfs: "/"}

// Placeholders are the names a manifest path may start with, in the order
// error messages list them.
var Placeholders = []string{"{sysfs}", "{procfs}", "{rootfs}"}

// root returns the directory placeholder stands for, and whether it is one.
func (r Roots) root(placeholder string) (dir, flag string, ok bool) {
	switch placeholder {
	case "{sysfs}":
		return or(r.Sysfs, DefaultRoots.Sysfs), "--path.sysfs", true
	case "{procfs}":
		return or(r.Procfs, DefaultRoots.Procfs), "--path.procfs", true
	case "{rootfs}":
		return or(r.Rootfs, DefaultRoots.Rootfs), "--path.rootfs", true
	}
	return "", "", false
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// splitPlaceholder cuts a leading "{name}" off p: "{sysfs}/class" gives
// "{sysfs}" and "/class". A path without one gives "" and p.
func splitPlaceholder(p string) (placeholder, rest string) {
	if !strings.HasPrefix(p, "{") {
		return "", p
	}
	end := strings.IndexByte(p, '}')
	if end < 0 {
		return p, "" // an unclosed brace: reported as an unknown placeholder
	}
	return p[:end+1], p[end+1:]
}

// checkPath says what is wrong with a manifest path, or nil: it must be
// absolute, or a known placeholder alone or followed by "/...".
func checkPath(p string) error {
	ph, rest := splitPlaceholder(p)
	if ph == "" {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%q must be an absolute path or start with one of %s", p, strings.Join(Placeholders, ", "))
		}
		return nil
	}
	if _, _, ok := (Roots{}).root(ph); !ok {
		return fmt.Errorf("%q: unknown placeholder %s (known: %s)", p, ph, strings.Join(Placeholders, ", "))
	}
	if rest != "" && !strings.HasPrefix(rest, "/") {
		return fmt.Errorf("%q: a placeholder must be followed by / or end the path (%s/...)", p, ph)
	}
	return nil
}

// Expand returns p with its placeholder, if any, replaced by its root. A
// path without one is returned as it is (manifests written before
// placeholders keep working).
func (r Roots) Expand(p string) (string, error) {
	if err := checkPath(p); err != nil {
		return "", err
	}
	ph, rest := splitPlaceholder(p)
	if ph == "" {
		return p, nil
	}
	dir, flag, _ := r.root(ph)
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s %q is not an absolute path, so %s cannot be granted", flag, dir, p)
	}
	return filepath.Join(dir, rest), nil
}

func (r Roots) expandAll(key string, paths []string) ([]string, error) {
	if paths == nil {
		return nil, nil
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		var err error
		if out[i], err = r.Expand(p); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return out, nil
}

// Expand returns a copy of m whose paths (paths.* and network.unix) have
// their placeholders replaced by r's roots: what the sandbox enforces.
func (m *Manifest) Expand(r Roots) (*Manifest, error) {
	out := *m
	var err error
	if out.Paths.ReadOnly, err = r.expandAll("paths.read_only", m.Paths.ReadOnly); err != nil {
		return nil, err
	}
	if out.Paths.ReadWrite, err = r.expandAll("paths.read_write", m.Paths.ReadWrite); err != nil {
		return nil, err
	}
	if out.Paths.Devices, err = r.expandAll("paths.devices", m.Paths.Devices); err != nil {
		return nil, err
	}
	if m.Network != nil {
		n := *m.Network
		if n.Unix, err = r.expandAll("network.unix", m.Network.Unix); err != nil {
			return nil, err
		}
		out.Network = &n
	}
	return &out, nil
}

// PathList is a list of manifest paths. Decoding checks each entry where
// it is written, so a mistyped placeholder is reported with its file and
// line ("m.yaml:7: paths.read_only: ...") by YAMLError.
type PathList []string

// UnmarshalYAML decodes a sequence of paths and checks each.
func (l *PathList) UnmarshalYAML(n *yaml.Node) error {
	var paths []string
	if err := n.Decode(&paths); err != nil {
		return err
	}
	var errs []string
	for i, p := range paths {
		if err := checkPath(p); err != nil {
			line := n.Line
			if i < len(n.Content) {
				line = n.Content[i].Line
			}
			errs = append(errs, fmt.Sprintf("line %d: %v", line, err))
		}
	}
	if errs != nil {
		// A TypeError is how yaml.v3 lets an unmarshaler report errors
		// with their lines and go on decoding the rest.
		return &yaml.TypeError{Errors: errs}
	}
	if paths == nil {
		paths = []string{} // "read_only: []" is a statement: grant nothing (Merge overrides with it)
	}
	*l = paths
	return nil
}

// Package discover finds plugins in the plugin directories. A plugin is an
// executable named plexporter-<name> (a symlink is fine: that is how a
// host-role directory enables a shipped plugin), optionally with its manifest
// plexporter-<name>.yaml beside it (beside the link, else beside the target).
package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// Prefix of every plugin executable.
const Prefix = "plexporter-"

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Plugin is one discovered plugin.
type Plugin struct {
	Name     string
	Path     string // as found in the directory
	Target   string // symlinks resolved
	Manifest string // manifest path ("" when there is none)
	// Identity changes when the binary is replaced (new inode, size or
	// mtime, or a link pointing elsewhere); the host restarts the plugin then.
	Identity string
}

// Shadowed records a plugin hidden by the same name in a later directory.
type Shadowed struct {
	Name, Path, By string
}

// Result of a scan.
type Result struct {
	Plugins  []Plugin // sorted by name
	Shadowed []Shadowed
	Problems []error // unreadable directories, bad names; never fatal
}

// Scan reads dirs in order; a name found again in a later dir wins.
func Scan(dirs []string) Result {
	var res Result
	byName := map[string]Plugin{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !os.IsNotExist(err) {
				res.Problems = append(res.Problems, fmt.Errorf("plugin dir %s: %w", dir, err))
			}
			continue
		}
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name(), Prefix)
			if !ok || strings.HasSuffix(name, ".yaml") || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			path := filepath.Join(dir, e.Name())
			p, err := inspect(name, path)
			if err != nil {
				res.Problems = append(res.Problems, err)
				continue
			}
			if prev, ok := byName[name]; ok {
				res.Shadowed = append(res.Shadowed, Shadowed{Name: name, Path: prev.Path, By: path})
			}
			byName[name] = p
		}
	}
	for _, p := range byName {
		res.Plugins = append(res.Plugins, p)
	}
	sort.Slice(res.Plugins, func(i, j int) bool { return res.Plugins[i].Name < res.Plugins[j].Name })
	return res
}

func inspect(name, path string) (Plugin, error) {
	if !validName.MatchString(name) {
		return Plugin{}, fmt.Errorf("plugin %s: name %q must match %s", path, name, validName)
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Plugin{}, fmt.Errorf("plugin %s: %w", path, err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		return Plugin{}, fmt.Errorf("plugin %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return Plugin{}, fmt.Errorf("plugin %s: not an executable file (mode %s)", path, fi.Mode())
	}
	p := Plugin{Name: name, Path: path, Target: target}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		p.Identity = fmt.Sprintf("%s:%d:%d:%d:%d", target, st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
	} else {
		p.Identity = fmt.Sprintf("%s:%d:%d", target, fi.Size(), fi.ModTime().UnixNano())
	}
	for _, cand := range []string{path + ".yaml", target + ".yaml"} {
		if _, err := os.Stat(cand); err == nil {
			p.Manifest = cand
			break
		}
	}
	return p, nil
}

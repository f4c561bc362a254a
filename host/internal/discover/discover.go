// Package discover finds plugins in the plugin directories. A plugin is an
// executable named plexporter-<name> (a symlink is fine: that is how a
// host-role directory enables a shipped plugin), optionally with its manifest
// plexporter-<name>.yaml beside it (beside the link, else beside the target).
//
// Every file named like a plugin is accounted for: it runs (Plugins), or it
// is refused with its reason (Refused: not an executable, a dangling link, a
// symlink loop...), or it is hidden by the same name in a later directory
// (Shadowed). Names outside the naming scheme and manifests no plugin uses
// are Problems: worth a warning, but nothing that was meant to run.
package discover

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/plexporter/plexporter/host/internal/trust"
)

// Prefix of every plugin executable.
const Prefix = "plexporter-"

// ManifestSuffix ends a manifest's name: plexporter-<name>.yaml.
const ManifestSuffix = ".yaml"

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

// Refused is a file named like a plugin that cannot be run.
type Refused struct {
	Name, Path string
	Reason     string
}

// Shadowed records a plugin hidden by the same name in a later directory.
type Shadowed struct {
	Name, Path, By string
}

// Result of a scan.
type Result struct {
	Plugins  []Plugin  // sorted by name
	Refused  []Refused // sorted by name
	Shadowed []Shadowed
	Problems []error // unreadable directories, bad names, unused manifests; never fatal
	// Missing are directories that do not exist; Empty, directories that
	// hold no file named like a plugin. Either is usually a wrong
	// --plugin.dir or a package not installed, and would otherwise look
	// like a healthy host with nothing to say.
	Missing, Empty []string
}

// Scan reads dirs in order; a name found again in a later dir wins, even if
// it cannot be run there: the operator who put it there meant to replace
// the earlier one, and a refusal says so, where silently running the
// earlier one would not.
func Scan(dirs []string) Result {
	var res Result
	type candidate struct {
		path    string
		plugin  *Plugin
		refused *Refused
	}
	byName := map[string]candidate{}
	var manifests []string // every plexporter-<name>.yaml seen, in scan order
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if os.IsNotExist(err) {
				res.Missing = append(res.Missing, dir)
			} else {
				res.Problems = append(res.Problems, fmt.Errorf("plugin dir %s: %w", dir, err))
			}
			continue
		}
		found := false
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name(), Prefix)
			if !ok || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if base, ok := strings.CutSuffix(name, ManifestSuffix); ok {
				if validName.MatchString(base) {
					manifests = append(manifests, path)
				}
				continue
			}
			found = true
			if !validName.MatchString(name) {
				res.Problems = append(res.Problems, fmt.Errorf("plugin %s: name %q must match %s", path, name, validName))
				continue
			}
			c := candidate{path: path}
			if p, err := inspect(name, path); err != nil {
				c.refused = &Refused{Name: name, Path: path, Reason: err.Error()}
			} else {
				c.plugin = &p
			}
			if prev, ok := byName[name]; ok {
				res.Shadowed = append(res.Shadowed, Shadowed{Name: name, Path: prev.path, By: path})
			}
			byName[name] = c
		}
		if !found {
			res.Empty = append(res.Empty, dir)
		}
	}
	for _, c := range byName {
		if c.plugin != nil {
			res.Plugins = append(res.Plugins, *c.plugin)
		} else {
			res.Refused = append(res.Refused, *c.refused)
		}
	}
	sort.Slice(res.Plugins, func(i, j int) bool { return res.Plugins[i].Name < res.Plugins[j].Name })
	sort.Slice(res.Refused, func(i, j int) bool { return res.Refused[i].Name < res.Refused[j].Name })

	// A manifest nothing uses is a warning, not a refusal: there is nothing
	// to run, and a refusal would page someone for what package removal
	// (which keeps configuration files) leaves behind. But it usually means
	// a mistake worth saying — a manifest put where no binary is, or a
	// plugin overridden by a build in a later directory that runs without
	// the manifest beside the earlier one.
	for _, m := range manifests {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), Prefix), ManifestSuffix)
		c, found := byName[name]
		switch {
		case !found:
			res.Problems = append(res.Problems, fmt.Errorf("manifest %s: no plugin binary %s%s in any plugin directory; ignored", m, Prefix, name))
		case c.plugin != nil && c.plugin.Manifest != m:
			uses := "no manifest"
			if c.plugin.Manifest != "" {
				uses = "manifest " + c.plugin.Manifest
			}
			res.Problems = append(res.Problems, fmt.Errorf("manifest %s is not used: plugin %s runs from %s with %s (put the manifest beside that binary or its link)", m, name, c.plugin.Path, uses))
		}
	}
	return res
}

// inspect resolves a plugin candidate; an error says why it cannot run.
func inspect(name, path string) (Plugin, error) {
	target, fi, err := trust.Policy{}.Executable(path)
	if err != nil {
		return Plugin{}, err
	}
	p := Plugin{Name: name, Path: path, Target: target}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		p.Identity = fmt.Sprintf("%s:%d:%d:%d:%d", target, st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
	} else {
		p.Identity = fmt.Sprintf("%s:%d:%d", target, fi.Size(), fi.ModTime().UnixNano())
	}
	// Lstat, not Stat: a manifest that is a dangling link is a broken
	// manifest (refused when read), not a missing one (no privileges).
	for _, cand := range []string{path + ManifestSuffix, target + ManifestSuffix} {
		if _, err := os.Lstat(cand); err == nil {
			p.Manifest = cand
			break
		}
	}
	return p, nil
}

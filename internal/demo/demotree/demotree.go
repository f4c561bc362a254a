// Package demotree builds one node's file systems from the shipped
// plugins' fixtures: a sysfs with the RDMA devices, netdevs and NVMe
// controllers of the rdma, ethtool and nvme fixtures, and a procfs with
// the NFS mounts and socket tables of the nfs fixtures and the guest's
// CPU, pressure, memory and disk files, and a textfile directory. `make demo` serves
// every shipped plugin over it; the host's tests run the plugins over it at
// arbitrary roots.
package demotree

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/plexporter/plexporter/sdk/fixture"
)

// SysfsArchives are the sysfs fixtures merged into the tree's sys/, paths
// relative to the module root. The ethtool tree is the rdma tree's devices
// plus their netdevs; nvme's controllers sit beside them. An entry two
// archives both have must be the same in both.
var SysfsArchives = []string{
	"plugins/rdma/testdata/sysfs.ttar",
	"plugins/ethtool/testdata/sysfs.ttar",
	"plugins/nvme/testdata/sysfs.ttar",
}

// NodeArchives are fixtures of both trees, their proc/ merged into the
// tree's proc/ and their sys/ into its sys/: the guest's stat, pressure,
// meminfo, diskstats and whole disks (sys/block).
var NodeArchives = []string{
	"plugins/guest/testdata/demo.ttar",
}

// ProcPID is the process whose directory holds the NFS captures; proc/self
// links to it, as procfs's self does to the reader.
const ProcPID = "4242"

// ProcfsFiles are the flat captures laid out under proc/<ProcPID>/: an
// NFSv3 and an NFSv4.2 nconnect mount whose lanes the socket tables match.
var ProcfsFiles = map[string]string{
	"mountstats": "plugins/nfs/testdata/mountstats-mixed",
	"net/tcp":    "plugins/nfs/testdata/tcp-synthetic",
	"net/tcp6":   "plugins/nfs/testdata/tcp6-synthetic",
	"mounts":     "plugins/ebpf/testdata/mounts-nfs", // the same mounts, whose servers ebpf watches
}

// Config is the demo's config file (--config.file): the shipped plugins'
// defaults, plus the sources the demo has data for that are off by default.
const Config = `# make demo: every shipped plugin over the fixtures of internal/demo/demotree.
plugins:
  rdma:
    config:
      # The recorded mlx5_0 port counts QPs in "auto, by type" mode.
      qp_counters: true
  ethtool:
    config:
      # Every driver statistic of the captured NICs, beside the rdma_* families.
      driver_stats: true
  attribution:
    config:
      # The demo node has no kubelet: its socket would be a collect error
      # at every scrape.
      pod_resources_socket: ""
`

// TextfileFixture is the textfile plugin's demo file, laid out in the
// tree's textfile/ directory.
const TextfileFixture = "plugins/textfile/testdata/demo.prom"

// Tree is a built tree: the roots to pass as --path.sysfs and --path.procfs,
// and the textfile plugin's directory.
type Tree struct {
	Root, Sysfs, Procfs, Textfile string
}

// Config is the demo's config file for this tree: Config, with the
// textfile plugin pointed at the tree's textfile directory and granted it
// (and nothing else) in its sandbox.
func (t Tree) Config() string {
	return Config + fmt.Sprintf(`  textfile:
    config:
      directories: [%q]
    manifest:
      paths:
        read_only: [%q]
`, t.Textfile, t.Textfile)
}

// Build lays the tree out in dst (created; it must not hold a tree
// already), reading the fixtures from the module root repo. Every
// directory is 0755 and every file 0644, so that a sandboxed plugin's user
// can read it.
func Build(repo, dst string) (Tree, error) {
	t := Tree{Root: dst, Sysfs: filepath.Join(dst, "sys"), Procfs: filepath.Join(dst, "proc"), Textfile: filepath.Join(dst, "textfile")}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return t, err
	}
	for _, dir := range []string{t.Sysfs, t.Procfs, t.Textfile} {
		if _, err := os.Lstat(dir); err == nil {
			return t, fmt.Errorf("%s exists already; remove it or build elsewhere", dir)
		}
	}
	staging, err := os.MkdirTemp(dst, ".unpack-")
	if err != nil {
		return t, err
	}
	defer os.RemoveAll(staging)
	for i, a := range SysfsArchives {
		one := filepath.Join(staging, fmt.Sprint(i))
		if err := fixture.Unpack(filepath.Join(repo, a), one); err != nil {
			return t, err
		}
		if err := merge(filepath.Join(one, "sys"), t.Sysfs); err != nil {
			return t, fmt.Errorf("merging %s: %w", a, err)
		}
	}
	for i, a := range NodeArchives {
		one := filepath.Join(staging, fmt.Sprint("node", i))
		if err := fixture.Unpack(filepath.Join(repo, a), one); err != nil {
			return t, err
		}
		for _, tree := range []struct{ from, to string }{{"sys", t.Sysfs}, {"proc", t.Procfs}} {
			if err := merge(filepath.Join(one, tree.from), tree.to); err != nil {
				return t, fmt.Errorf("merging %s: %w", a, err)
			}
		}
	}
	pid := filepath.Join(t.Procfs, ProcPID)
	for name, src := range ProcfsFiles {
		data, err := os.ReadFile(filepath.Join(repo, src))
		if err != nil {
			return t, err
		}
		p := filepath.Join(pid, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return t, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return t, err
		}
	}
	if err := os.Symlink(ProcPID, filepath.Join(t.Procfs, "self")); err != nil {
		return t, err
	}
	data, err := os.ReadFile(filepath.Join(repo, TextfileFixture))
	if err != nil {
		return t, err
	}
	if err := os.MkdirAll(t.Textfile, 0o755); err != nil {
		return t, err
	}
	if err := os.WriteFile(filepath.Join(t.Textfile, filepath.Base(TextfileFixture)), data, 0o644); err != nil {
		return t, err
	}
	return t, traversable(dst)
}

// merge copies the tree src into dst: directories, regular files and
// symlinks. An entry dst already has must be of the same type with the
// same content (a file) or target (a link); otherwise the archives
// disagree about the node and merging them would invent one.
func merge(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		have, lerr := root.Lstat(rel)
		if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
			return lerr
		}
		exists := lerr == nil
		if exists && have.Mode().Type() != d.Type() {
			return fmt.Errorf("%s: a %s in one archive, a %s in another", rel, d.Type(), have.Mode().Type())
		}
		switch {
		case d.IsDir():
			if !exists {
				return root.Mkdir(rel, 0o755)
			}
			return nil
		case d.Type() == fs.ModeSymlink:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if !exists {
				return root.Symlink(target, rel)
			}
			if old, err := root.Readlink(rel); err != nil || old != target {
				return fmt.Errorf("%s: links to %s in one archive, to %s in another", rel, target, old)
			}
			return nil
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !exists {
				return root.WriteFile(rel, data, 0o644)
			}
			if old, err := root.ReadFile(rel); err != nil || !bytes.Equal(old, data) {
				return fmt.Errorf("%s: different contents in two archives", rel)
			}
			return nil
		default:
			return fmt.Errorf("%s: unexpected file type %s", rel, d.Type())
		}
	})
}

// traversable makes every directory under root 0755 and every file 0644
// (the umask may have taken bits away): the sandboxed plugins run as
// another user.
func traversable(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(path, 0o755)
		case d.Type().IsRegular():
			return os.Chmod(path, 0o644)
		}
		return nil
	})
}

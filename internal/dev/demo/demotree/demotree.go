// Package demotree builds one node's file systems from the shipped
// plugins' fixtures: a sysfs with the RDMA devices, netdevs and NVMe
// controllers of the rdma, ethtool and nvme fixtures, a procfs with
// the NFS mounts and socket tables of the nfs fixtures and the guest's
// CPU, pressure, memory and disk files, and beside them what the other
// plugins read on a node: rocm-ernic's run directory (ernic), NIXL agents'
// telemetry rings (nixl), a Slurm job-mapping directory (attribution) and
// the load averages the example C collector reads (so), and a textfile
// directory (textfile). `make demo` serves
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
	"strings"

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

// NodeArchives are fixtures of the whole node, each top-level directory
// merged into the tree's (proc/ into proc/, sys/ into sys/, run/ into
// run/): the guest's stat, pressure, meminfo, diskstats and whole disks
// (sys/block); rocm-ernic's run directory with three servers' statistics
// and their processes (ernic); the Slurm job-mapping directory and
// proc/loadavg (attribution, so: the demo's own, testdata/node.ttar); the
// second port of mlx5_0's ConnectX-6 Dx (mlx5_3 at 0000:17:00.1, netdev
// ens1f1np1) with 802.3x global pause on and PFC off, whose driver
// statistics the ethtool demo serves from mlx5_ens1f1np1.txt (the demo's
// own, testdata/global-pause-port.ttar: the plugins' fixtures keep one
// port per card).
var NodeArchives = []string{
	"plugins/guest/testdata/demo.ttar",
	"plugins/ernic/testdata/ernic-run.ttar",
	"internal/dev/demo/demotree/testdata/node.ttar",
	"internal/dev/demo/demotree/testdata/global-pause-port.ttar",
}

// Directories of the tree, relative to its root, that the demo's config
// points plugins at.
const (
	ErnicRunDir   = "run/rocm-ernic"                 // ernic's run_dir
	NIXLDir       = "run/nixl/telemetry"             // nixl's telemetry_dirs
	JobMappingDir = "var/lib/plexporter/job-mapping" // attribution's job_mapping_dir
	LoadavgFile   = "proc/loadavg"                   // the example C collector's path
)

// NIXLRings are the telemetry rings laid out in NIXLDir, names relative to
// the module root: three v4 agents (a wrapped ring, an empty one, a full
// one). Binary files, so copied rather than archived. They are 0666: the
// plugin drains a ring by writing its read_pos, and in the sandbox it runs
// as a user of its own.
var NIXLRings = []string{
	"plugins/nixl/testdata/telemetry_dir/3f6c1a2e-8b4d-4e0f-9a71-5c2d8e9b0a14",
	"plugins/nixl/testdata/telemetry_dir/decode-tp1",
	"plugins/nixl/testdata/telemetry_dir/kvbm-worker-0",
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

// Config is the demo's config file (--config.file) for the tree: the
// shipped plugins' defaults, plus the sources the demo has data for that
// are off by default or elsewhere on a real node, each with the manifest
// grant its path needs. library is the example C collector built as a
// shared object (sdk/cabi/examples/loadavg.c) that the so plugin loads;
// "" leaves so without a library.
func (t Tree) Config(library string) string {
	c := strings.NewReplacer("@ROOT@", t.Root).Replace(config)
	if library != "" {
		c += strings.NewReplacer("@LIB@", library, "@LIBDIR@", filepath.Dir(library), "@ROOT@", t.Root).Replace(soConfig)
	}
	// The textfile plugin pointed at the tree's textfile directory and
	// granted it (and nothing else) in its sandbox.
	return c + fmt.Sprintf(`  textfile:
    config:
      directories: [%q]
    manifest:
      paths:
        read_only: [%q]
`, t.Textfile, t.Textfile)
}

const config = `# make demo: every shipped plugin over the fixtures of internal/dev/demo/demotree.
plugins:
  rdma:
    config:
      # The recorded mlx5_0 port counts QPs in "auto, by type" mode.
      qp_counters: true
  ethtool:
    config:
      # Every driver statistic of the captured NICs, beside the rdma_* families.
      driver_stats: true
  # The probe plugin's demo build answers these from a table
  # (plugins/probe/main_demo.go): the demo node has no network to probe.
  probe:
    config:
      icmp_targets: [10.0.5.20]
      https_endpoints: ["https://object.example/", "https://object.example/bkt"]
      probe_interval: 10s
      probe_timeout: 2s
  # The shipped config's opt-ins to the privileged plugins' capabilities
  # (deploy/etc/plexporter.yml); without them the sandbox refuses the three.
  ebpf:
    allow_capabilities: [CAP_BPF, CAP_PERFMON]
  nvme:
    allow_capabilities: [CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH]
  attribution:
    allow_capabilities: [CAP_DAC_OVERRIDE]
    config:
      # The demo node has no kubelet: its socket would be a collect error
      # at every scrape.
      pod_resources_socket: ""
      # Slurm's prolog wrote the jobs of two devices.
      job_mapping_dir: "@ROOT@/var/lib/plexporter/job-mapping"
    # The shipped grants (plexporter-attribution.yaml), the node's
    # job-mapping directory added: an override's list replaces the file's.
    manifest:
      paths:
        read_only:
          - "{sysfs}/bus/pci/devices"
          - "{sysfs}/class/infiniband"
          - "{sysfs}/class/net"
          - "{sysfs}/class/nvme"
          - "{sysfs}/devices"
          - "@ROOT@/var/lib/plexporter/job-mapping"
  # ernic and nixl are granted the node's directories instead of the
  # shipped ones (the host warns that their hints ask for those).
  ernic:
    config:
      run_dir: "@ROOT@/run/rocm-ernic"
    manifest:
      paths:
        read_only: ["@ROOT@/run/rocm-ernic", "{procfs}"]
  nixl:
    config:
      telemetry_dirs: ["@ROOT@/run/nixl/telemetry"]
      hostname: demo-node
      # The recorded agents write no more events: keep them, idle, for
      # the longest time the plugin allows instead of expiring them.
      stale_after: 168h
    manifest:
      paths:
        read_write: ["@ROOT@/run/nixl/telemetry"]
`

// soConfig is the so plugin's section: the example collector reading the
// tree's load averages.
const soConfig = `  so:
    config:
      library: "@LIB@"
      collector: {path: "@ROOT@/proc/loadavg"}
    manifest:
      paths:
        read_only: ["@LIBDIR@", "{procfs}/loadavg"]
`

// TextfileFixture is the textfile plugin's demo file, laid out in the
// tree's textfile/ directory.
const TextfileFixture = "plugins/textfile/testdata/demo.prom"

// Tree is a built tree: the roots to pass as --path.sysfs and --path.procfs,
// and the textfile plugin's directory.
type Tree struct {
	Root, Sysfs, Procfs, Textfile string
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
		tops, err := os.ReadDir(one)
		if err != nil {
			return t, err
		}
		for _, top := range tops {
			if err := merge(filepath.Join(one, top.Name()), filepath.Join(dst, top.Name())); err != nil {
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
	rings := filepath.Join(dst, NIXLDir)
	if err := os.MkdirAll(rings, 0o755); err != nil {
		return t, err
	}
	for _, src := range NIXLRings {
		data, err := os.ReadFile(filepath.Join(repo, src))
		if err != nil {
			return t, err
		}
		if err := os.WriteFile(filepath.Join(rings, filepath.Base(src)), data, 0o644); err != nil {
			return t, err
		}
	}
	if err := traversable(dst); err != nil {
		return t, err
	}
	for _, src := range NIXLRings {
		if err := os.Chmod(filepath.Join(rings, filepath.Base(src)), 0o666); err != nil {
			return t, err
		}
	}
	return t, nil
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

package demotree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildMergesEveryPluginsFixture(t *testing.T) {
	tree, err := Build("../../../..", filepath.Join(t.TempDir(), "demo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data",                 // rdma
		"sys/class/net/ens1f0np0/device",                                             // ethtool
		"sys/class/net/ens1f1np1/device/infiniband/mlx5_3/ports/1/gid_attrs/ndevs/0", // the 802.3x port
		"sys/class/nvme/nvme0/serial",                                                // nvme
		"proc/self/mountstats",                                                       // nfs
		"proc/self/net/tcp",
		ErnicRunDir + "/instances.json", // ernic
		ErnicRunDir + "/1.stats",
		JobMappingDir + "/mlx5_0", // attribution
		LoadavgFile,               // so
	} {
		if _, err := os.Stat(filepath.Join(tree.Root, p)); err != nil {
			t.Errorf("the tree lacks %s: %v", p, err)
		}
	}
	// nixl drains a ring by writing its read_pos, as another user in the
	// sandbox.
	for _, r := range NIXLRings {
		fi, err := os.Stat(filepath.Join(tree.Root, NIXLDir, filepath.Base(r)))
		if err != nil || fi.Mode().Perm() != 0o666 {
			t.Errorf("ring %s: %v %v, want a 0666 file", r, fi, err)
		}
	}
	// The config points the plugins at the tree.
	cfg := tree.Config("/lib/x.so")
	for _, want := range []string{filepath.Join(tree.Root, JobMappingDir), filepath.Join(tree.Root, NIXLDir), filepath.Join(tree.Root, ErnicRunDir), filepath.Join(tree.Root, LoadavgFile), `library: "/lib/x.so"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the config lacks %s:\n%s", want, cfg)
		}
	}
	if strings.Contains(tree.Config(""), "library") {
		t.Error("without a library the config must not configure so")
	}
	if tree.Sysfs != filepath.Join(tree.Root, "sys") || tree.Procfs != filepath.Join(tree.Root, "proc") {
		t.Errorf("roots = %+v", tree)
	}
	if _, err := Build("../../../..", tree.Root); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a second build into the same directory: %v", err)
	}
}

func TestMergeRefusesDisagreeingArchives(t *testing.T) {
	for name, second := range map[string]func(dir string){
		"file contents": func(d string) { os.WriteFile(filepath.Join(d, "a"), []byte("2"), 0o644) },
		"link targets": func(d string) {
			os.WriteFile(filepath.Join(d, "a"), []byte("1"), 0o644)
			os.Symlink("y", filepath.Join(d, "l"))
		},
		"types": func(d string) { os.Mkdir(filepath.Join(d, "a"), 0o755) },
	} {
		a, b, dst := t.TempDir(), t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(a, "a"), []byte("1"), 0o644)
		os.Symlink("x", filepath.Join(a, "l"))
		second(b)
		if err := merge(a, dst); err != nil {
			t.Fatal(err)
		}
		if err := merge(b, dst); err == nil {
			t.Errorf("%s: merging disagreeing archives must fail", name)
		}
	}
	// Agreeing archives merge.
	a, dst := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(a, "a"), []byte("1"), 0o644)
	if err := merge(a, dst); err != nil {
		t.Fatal(err)
	}
	if err := merge(a, dst); err != nil {
		t.Errorf("the same archive twice: %v", err)
	}
}

package main

import (
	"github.com/plexporter/plexporter/sdk/fixture"

	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/sysfs"
)

func repoFile(t *testing.T, rel ...string) string {
	t.Helper()
	root, err := findRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, rel...)...)
}

// The scaled tree has 16 devices of 2 ports, every new link resolves, and
// node_exporter's sysfs library reads every port with its counters.
func TestScaleRDMA(t *testing.T) {
	dir := t.TempDir()
	if err := fixture.Unpack(repoFile(t, "plugins", "rdma", "testdata", "sysfs.ttar"), dir); err != nil {
		t.Fatal(err)
	}
	sys := filepath.Join(dir, "sys")
	names, err := scaleRDMA(sys, rdmaDevices, rdmaPorts)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != rdmaDevices {
		t.Fatalf("%d devices, want %d", len(names), rdmaDevices)
	}
	ents, err := os.ReadDir(filepath.Join(sys, "class", "infiniband"))
	if err != nil || len(ents) != rdmaDevices {
		t.Fatalf("class/infiniband has %d entries (%v), want %d", len(ents), err, rdmaDevices)
	}
	for _, n := range names {
		for p := 1; p <= rdmaPorts; p++ {
			if _, err := os.Stat(filepath.Join(sys, "class", "infiniband", n, "ports", fmt.Sprint(p), "counters", "port_rcv_data")); err != nil {
				t.Errorf("%s port %d: %v", n, p, err)
			}
		}
		target, err := os.Readlink(filepath.Join(sys, "class", "infiniband", n, "device"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(sys, "bus", "pci", "devices", filepath.Base(target))); err != nil {
			t.Errorf("%s: PCI device %s not on the bus: %v", n, filepath.Base(target), err)
		}
	}
	fs, err := sysfs.NewFS(sys)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := fs.InfiniBandClass()
	if err != nil {
		t.Fatal(err)
	}
	if len(ib) != rdmaDevices {
		t.Fatalf("procfs/sysfs sees %d devices", len(ib))
	}
	for name, d := range ib {
		if len(d.Ports) != rdmaPorts {
			t.Errorf("procfs/sysfs: %s has %d ports", name, len(d.Ports))
		}
	}
}

// The generated procfs tree parses with procfs (as node_exporter and the
// plugin read it): every NFS mount with its nconnect lanes, mountinfo in step.
func TestBuildProcfs(t *testing.T) {
	root := t.TempDir()
	if err := buildProcfs(root, repoFile(t, "plugins", "nfs", "testdata", "mountstats-nfs4.2-nconnect4"), nfsMounts, nfsNconnect); err != nil {
		t.Fatal(err)
	}
	fs, err := procfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	self, err := fs.Self()
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := self.MountStats()
	if err != nil {
		t.Fatal(err)
	}
	info, err := self.MountInfo()
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != len(mounts) {
		t.Fatalf("mountinfo has %d entries, mountstats %d", len(info), len(mounts))
	}
	nfs := 0
	for i, m := range mounts {
		st, ok := m.Stats.(*procfs.MountStatsNFS)
		if !ok {
			continue
		}
		nfs++
		if len(st.Transport) != nfsNconnect {
			t.Errorf("%s: %d transports, want %d", m.Device, len(st.Transport), nfsNconnect)
		}
		if info[i].MountPoint != m.Mount || info[i].SuperOptions["addr"] == "" {
			t.Errorf("mountinfo entry %d (%s, %v) does not match %s", i, info[i].MountPoint, info[i].SuperOptions, m.Mount)
		}
	}
	if nfs != nfsMounts {
		t.Fatalf("%d NFS mounts, want %d", nfs, nfsMounts)
	}
	tcp, err := os.ReadFile(filepath.Join(root, "self", "net", "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(splitLines(string(tcp))), 2+nfsServers*nfsNconnect; got != want {
		t.Fatalf("net/tcp has %d lines, want %d", got, want)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

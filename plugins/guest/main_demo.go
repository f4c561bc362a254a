//go:build demo

// The demo build of plexporter-guest (make demo): the plugin unchanged,
// except for the filesystems. The demo node's procfs (internal/dev/demo/
// demotree, from testdata/demo.ttar) has the guest's stat, pressure,
// meminfo and diskstats, but statfs answers cannot live in a file tree, and
// the node's <procfs>/self/mountinfo is the nfs fixture's, whose mounts do
// not exist here. So the mount table is the vm fixture's (testdata/vm.ttar)
// and statfs answers from the table below.
package main

import (
	"fmt"
	"time"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
)

// demoMounts is the vm fixture's mount table: a bind mount of /data, a mount
// point with a space, pseudo filesystems and two NFS exports.
var demoMounts = []*procfs.MountInfo{
	{MajorMinorVer: "253:1", MountPoint: "/", FSType: "ext4", Source: "/dev/vda1"},
	{MajorMinorVer: "0:21", MountPoint: "/proc", FSType: "proc", Source: "proc"},
	{MajorMinorVer: "0:22", MountPoint: "/sys", FSType: "sysfs", Source: "sysfs"},
	{MajorMinorVer: "0:26", MountPoint: "/run", FSType: "tmpfs", Source: "tmpfs"},
	{MajorMinorVer: "253:16", MountPoint: "/data", FSType: "xfs", Source: "/dev/vdb"},
	{MajorMinorVer: "253:16", MountPoint: "/var/lib/containers", FSType: "xfs", Source: "/dev/vdb"},
	{MajorMinorVer: "259:1", MountPoint: `/mnt/scratch\040space`, FSType: "ext4", Source: "/dev/nvme0n1p1"},
	{MajorMinorVer: "0:52", MountPoint: "/mnt/shared", FSType: "nfs4", Source: "10.0.5.20:/exports/shared"},
	{MajorMinorVer: "0:53", MountPoint: "/mnt/models", FSType: "nfs", Source: "10.0.5.21:/vol/models"},
}

// demoFilesystems answers statfs by mount point (the host root is not
// read): 4 KiB blocks, the NFS servers' 1 MiB fragments.
var demoFilesystems = map[string]fsUsage{
	"/":                  {blocks: 7864320, free: 5242880, avail: 4849664, blockSize: 4096, files: 1966080, filesFree: 1700000},
	"/data":              {blocks: 268435456, free: 67108864, avail: 67108864, blockSize: 4096, files: 134217728, filesFree: 134000000},
	"/mnt/scratch space": {blocks: 900000000, free: 899000000, avail: 853000000, blockSize: 4096, files: 225000000, filesFree: 224999000},
	"/mnt/shared":        {blocks: 10485760, free: 5242880, avail: 5242880, blockSize: 1 << 20},
	"/mnt/models":        {blocks: 2097152, free: 1048576, avail: 1048576, blockSize: 1 << 20, files: 1 << 30, filesFree: 1<<30 - 5000},
}

func main() {
	p := newPlugin()
	p.readMounts = readDemoMounts
	p.statfs = newStatfsRunner(demoStatfs, time.Now)
	sdk.Serve(p)
}

func readDemoMounts(procfs.FS, int) ([]*procfs.MountInfo, error) { return demoMounts, nil }

// demoStatfs answers by mount point: the demo's host root is "/", so the
// path statfs is given is the mount point itself.
func demoStatfs(path string) (fsUsage, error) {
	u, ok := demoFilesystems[path]
	if !ok {
		return fsUsage{}, fmt.Errorf("statfs %s: no such filesystem in the demo", path)
	}
	return u, nil
}

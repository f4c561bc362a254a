package main

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/plexporter/plexporter/plugins/internal/sysfs"
)

// Device files a process may hold open, by the target of its
// /proc/<pid>/fd link: the path in the process's own mount namespace,
// where container runtimes create device nodes under their host names
// (/dev/infiniband/uverbs0, /dev/nvme0n1). Only paths in /dev count: a
// regular file named nvme0 elsewhere is not the controller. A node made
// under another name (mknod in a container) is not recognised.
var (
	// uverbsFile is an RDMA device's verbs character device, which every
	// user-space RDMA program (libibverbs) opens.
	uverbsFile = regexp.MustCompile(`^/dev/infiniband/(uverbs[0-9]+)$`)
	// nvmeCtrlFile is an NVMe controller's character device (nvme-cli,
	// SPDK-less passthrough).
	nvmeCtrlFile = regexp.MustCompile(`^/dev/(nvme[0-9]+)$`)
	// nvmeDiskFile is an NVMe namespace's block device or a partition of
	// it: group 1 the disk, 2 its subsystem instance, 3 its namespace id.
	nvmeDiskFile = regexp.MustCompile(`^/dev/(nvme([0-9]+)n([0-9]+))(?:p[0-9]+)?$`)
)

// deviceFiles resolves device file paths to the devices the other plugins
// report, remembering each answer for the scan it serves (one scrape):
// hundreds of processes of one job hold the same uverbs file.
type deviceFiles struct {
	res   resolver
	cache map[string][]device
}

func newDeviceFiles(res resolver) *deviceFiles {
	return &deviceFiles{res: res, cache: map[string][]device{}}
}

// resolve maps an fd link target to devices; nil when it is no device
// file the plugins report on (a regular file, a socket, /dev/null) or
// sysfs does not know it (a device gone since the file was opened):
//
//   - /dev/infiniband/uverbsN → the RDMA device whose verbs device it is
//     ({sysfs}/class/infiniband_verbs/uverbsN/ibdev), kind rdma;
//   - /dev/nvmeN → the controller nvmeN, kind nvme;
//   - /dev/nvmeSnN[pP] → the controller(s) behind the namespace, kind nvme:
//     the controller whose sysfs directory holds the disk nvmeSnN (one
//     path), or with native multipath each controller holding a path
//     nvmeScCnN to it.
func (f *deviceFiles) resolve(target string) []device {
	if d, ok := f.cache[target]; ok {
		return d
	}
	var out []device
	switch {
	case uverbsFile.MatchString(target):
		uverbs := uverbsFile.FindStringSubmatch(target)[1]
		if ibdev, err := sysfs.ReadAttr(filepath.Join(f.res.sysfs, "class", "infiniband_verbs", uverbs, "ibdev")); err == nil && ibdev != "" {
			out = []device{{Kind: kindRDMA, Name: ibdev, PCIAddr: pciFunction(filepath.Join(f.res.sysfs, "class", "infiniband", ibdev))}}
		}
	case nvmeCtrlFile.MatchString(target):
		out = f.controllers(func(ctrl string, _ []string) bool { return ctrl == nvmeCtrlFile.FindStringSubmatch(target)[1] })
	case nvmeDiskFile.MatchString(target):
		m := nvmeDiskFile.FindStringSubmatch(target)
		out = f.controllers(func(_ string, children []string) bool {
			for _, c := range children {
				if c == m[1] || isNVMePath(c, m[2], m[3]) {
					return true
				}
			}
			return false
		})
	}
	f.cache[target] = out
	return out
}

// isNVMePath tells whether name is a native-multipath path device
// nvme<subsys>c<ctrl>n<ns> of the given subsystem instance and namespace.
func isNVMePath(name, subsys, ns string) bool {
	rest, ok := strings.CutPrefix(name, "nvme"+subsys+"c")
	if !ok {
		return false
	}
	ctrl, nsid, ok := strings.Cut(rest, "n")
	return ok && ctrl != "" && strings.Trim(ctrl, "0123456789") == "" && nsid == ns
}

// controllers returns the NVMe controllers of {sysfs}/class/nvme for
// which match, given the controller's name and its directory's entries,
// is true.
func (f *deviceFiles) controllers(match func(ctrl string, children []string) bool) []device {
	class := filepath.Join(f.res.sysfs, "class", "nvme")
	ctrls, _ := sysfs.Names(class) // none: no NVMe on this node
	var out []device
	for _, c := range ctrls {
		children, _ := sysfs.Names(filepath.Join(class, c))
		if match(c, children) {
			out = append(out, device{Kind: kindNVMe, Name: c, PCIAddr: pciFunction(filepath.Join(class, c))})
		}
	}
	return out
}

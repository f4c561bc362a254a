package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

const (
	// defaultStatfsTimeout bounds the statfs calls of one scrape. A local
	// filesystem answers in microseconds; an NFS statfs is one round trip
	// to the server, so a second is a server in trouble.
	defaultStatfsTimeout = time.Second
	// minimumStatfsTimeout keeps a typo ("1ms" for "1s") from skipping
	// every healthy NFS mount.
	minimumStatfsTimeout = 10 * time.Millisecond
	defaultKmsgPath      = "/dev/kmsg"
)

// defaultDiskDevices matches the whole-disk names of the common guest
// block drivers: virtio-blk (vda), Xen (xvda), SCSI/virtio-scsi/SATA (sda)
// and NVMe namespaces (nvme0n1). Partitions are excluded separately (see
// diskstats.go), so a wider regex cannot let them in.
const defaultDiskDevices = `^(vd[a-z]+|xvd[a-z]+|sd[a-z]+|nvme[0-9]+n[0-9]+)$`

// defaultMountPointsExclude leaves out the kernel's pseudo trees, where a
// bind-mounted disk filesystem would only repeat a real mount point.
const defaultMountPointsExclude = `^/(dev|proc|sys)($|/)`

// defaultFilesystemTypes are the disk and network filesystems whose usage
// an operator alerts on; pseudo filesystems (tmpfs, overlay, cgroup, ...)
// are not a disk.
var defaultFilesystemTypes = []string{"ext2", "ext3", "ext4", "xfs", "btrfs", "vfat", "nfs", "nfs4"}

// config is the plugin's section of the host configuration
// (plugins.guest.config); the json tags are its keys.
type config struct {
	// DiskDevices selects the whole disks of <procfs>/diskstats by name.
	DiskDevices string `json:"disk_devices"`
	// FilesystemTypes are the mount types whose usage is read with statfs.
	FilesystemTypes []string `json:"filesystem_types"`
	// MountPointsExclude leaves mount points out by path.
	MountPointsExclude string `json:"mount_points_exclude"`
	// MountinfoPID is the process whose mount table is read
	// (<procfs>/<pid>/mountinfo); 0 is the plugin's own (self).
	MountinfoPID int `json:"mountinfo_pid"`
	// StatfsTimeout bounds the statfs calls of a scrape.
	StatfsTimeout sdk.Duration `json:"statfs_timeout"`
	// Kmsg enables the soft-lockup tailer (default true).
	Kmsg *bool `json:"kmsg"`
	// KmsgPath is the kernel log device.
	KmsgPath string `json:"kmsg_path"`

	// The active probes' keys, which moved to plugins.probe.config with
	// the probes: accepted, unused, so that a section written before the
	// move still starts guest; Configure warns about each (movedKeys).
	ProbeInterval  json.RawMessage `json:"probe_interval"`
	ProbeTimeout   json.RawMessage `json:"probe_timeout"`
	ICMPTargets    json.RawMessage `json:"icmp_targets"`
	NFSProbe       json.RawMessage `json:"nfs_probe"`
	HTTPSEndpoints json.RawMessage `json:"https_endpoints"`

	// Compiled by validate; not keys.
	diskRE, excludeRE *regexp.Regexp
}

// defaultConfig returns the settings of an empty section.
func defaultConfig() config {
	return config{
		DiskDevices:        defaultDiskDevices,
		FilesystemTypes:    slices.Clone(defaultFilesystemTypes), // Decode writes into the slice
		MountPointsExclude: defaultMountPointsExclude,
		StatfsTimeout:      sdk.Duration{Duration: defaultStatfsTimeout},
		KmsgPath:           defaultKmsgPath,
	}
}

// validate checks the settings, naming the key of the first bad one, and
// compiles the regexes.
func (c *config) validate() error {
	var err error
	if c.diskRE, err = regexp.Compile(c.DiskDevices); err != nil {
		return fmt.Errorf("disk_devices: %w", err)
	}
	if c.excludeRE, err = regexp.Compile(c.MountPointsExclude); err != nil {
		return fmt.Errorf("mount_points_exclude: %w", err)
	}
	types := make([]string, 0, len(c.FilesystemTypes))
	for i, t := range c.FilesystemTypes {
		t = strings.TrimSpace(t)
		if t == "" {
			return fmt.Errorf("filesystem_types[%d]: empty filesystem type", i)
		}
		if strings.ContainsAny(t, " \t\n,") {
			return fmt.Errorf("filesystem_types[%d]: %q is not a filesystem type name like ext4", i, t)
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	c.FilesystemTypes = types
	if c.MountinfoPID < 0 {
		return fmt.Errorf("mountinfo_pid: %d is not a process id (0 for the plugin's own mount table)", c.MountinfoPID)
	}
	if d := c.StatfsTimeout.Duration; d < minimumStatfsTimeout {
		return fmt.Errorf("statfs_timeout: %s is below the minimum of %s", d, minimumStatfsTimeout)
	}
	if c.kmsgEnabled() && c.KmsgPath == "" {
		return errors.New("kmsg_path: must not be empty while kmsg is on")
	}
	return nil
}

// movedToProbe are the keys of the active probes, which moved with them
// from plugins.guest.config to plugins.probe.config.
var movedToProbe = []string{"probe_interval", "probe_timeout", "icmp_targets", "nfs_probe", "https_endpoints"}

// movedKeys warns, once per Configure, about each probe key a section
// still sets, naming where it went. Not a refusal: guest's own families
// (steal, pressure, memory, disks, filesystems, soft lockups) must not stop
// on an upgrade because of keys it no longer uses; the warning reaches the
// host's log at every start, so the probes do not stop without a word.
func movedKeys(cfg sdk.Config) {
	var keys map[string]json.RawMessage
	if err := cfg.Decode(&keys); err != nil {
		return // not a mapping: Decode into config says so under its key
	}
	for _, k := range movedToProbe {
		if _, ok := keys[k]; ok {
			cfg.Warn("%s: ignored: the active probes moved to the probe plugin; set %s under plugins.probe.config (install plexporter-plugin-probe) and remove it from plugins.guest.config (plugins/probe/README.md, Upgrading from guest's probes)", k, k)
		}
	}
}

// kmsgEnabled tells whether the soft-lockup tailer should run (kmsg unset
// means true).
func (c *config) kmsgEnabled() bool { return c.Kmsg == nil || *c.Kmsg }

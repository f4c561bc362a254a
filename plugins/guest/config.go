package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
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

	// defaultProbeInterval: per-VM probing is for fleet aggregates (is
	// the NFS server answering every VM?), not for one VM's alerting, so
	// a probe every few minutes is enough (as the Crusoe exporter has it).
	defaultProbeInterval = 5 * time.Minute
	// minimumProbeInterval keeps a fleet from probing its servers several
	// times a second by a typo.
	minimumProbeInterval = 10 * time.Second
	defaultProbeTimeout  = 10 * time.Second
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

	// ProbeInterval is the time between probe rounds.
	ProbeInterval sdk.Duration `json:"probe_interval"`
	// ProbeTimeout bounds each probe.
	ProbeTimeout sdk.Duration `json:"probe_timeout"`
	// ICMPTargets are hosts to send an ICMP echo to.
	ICMPTargets []string `json:"icmp_targets"`
	// NFSProbe sends an NFS NULL RPC to every NFS server in the mount
	// table.
	NFSProbe bool `json:"nfs_probe"`
	// HTTPSEndpoints are URLs to GET (object-store endpoints).
	HTTPSEndpoints []string `json:"https_endpoints"`

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
		ProbeInterval:      sdk.Duration{Duration: defaultProbeInterval},
		ProbeTimeout:       sdk.Duration{Duration: defaultProbeTimeout},
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
	return c.validateProbes()
}

// validateProbes checks the probe keys and normalises the targets.
func (c *config) validateProbes() error {
	if d := c.ProbeInterval.Duration; d < minimumProbeInterval {
		return fmt.Errorf("probe_interval: %s is below the minimum of %s", d, minimumProbeInterval)
	}
	if d := c.ProbeTimeout.Duration; d <= 0 || d >= c.ProbeInterval.Duration {
		return fmt.Errorf("probe_timeout: %s must be above 0 and below probe_interval (%s)", d, c.ProbeInterval.Duration)
	}
	for i, h := range c.ICMPTargets {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, " /:") && net.ParseIP(h) == nil {
			return fmt.Errorf("icmp_targets[%d]: %q is not a host name or IP address", i, c.ICMPTargets[i])
		}
		c.ICMPTargets[i] = h
	}
	for i, raw := range c.HTTPSEndpoints {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("https_endpoints[%d]: %w", i, err)
		}
		if u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("https_endpoints[%d]: %q is not an https:// URL with a host", i, raw)
		}
		c.HTTPSEndpoints[i] = u.String()
	}
	return nil
}

// probesEnabled tells whether any probe is configured; without one the
// prober does not run.
func (c *config) probesEnabled() bool {
	return c.NFSProbe || len(c.ICMPTargets) > 0 || len(c.HTTPSEndpoints) > 0
}

// kmsgEnabled tells whether the soft-lockup tailer should run (kmsg unset
// means true).
func (c *config) kmsgEnabled() bool { return c.Kmsg == nil || *c.Kmsg }

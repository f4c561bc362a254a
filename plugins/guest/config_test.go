package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table
// and checks where each one lands.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	p := newPlugin()
	var opened string
	p.openKmsg = func(path string) (io.ReadCloser, error) { opened = path; return quietKmsg(path) }
	t.Cleanup(func() { p.Close() })
	err := sdktest.Configure(t, p, map[string]any{
		"disk_devices":         "^vd[a-z]$",
		"filesystem_types":     []any{"ext4", " xfs", "ext4"},
		"mount_points_exclude": "^/boot",
		"mountinfo_pid":        1,
		"statfs_timeout":       "250ms",
		"kmsg":                 true,
		"kmsg_path":            "/host/dev/kmsg",
	}, sdk.Paths{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if !c.diskRE.MatchString("vda") || c.diskRE.MatchString("vda1") || !slices.Equal(c.FilesystemTypes, []string{"ext4", "xfs"}) ||
		!c.excludeRE.MatchString("/boot/efi") || c.StatfsTimeout.Duration != 250*time.Millisecond || c.MountinfoPID != 1 ||
		opened != "/host/dev/kmsg" || p.tailer == nil {
		t.Errorf("configured %+v (kmsg opened: %q)", c, opened)
	}

	// The defaults.
	p = newPlugin()
	opened = ""
	p.openKmsg = func(path string) (io.ReadCloser, error) { opened = path; return quietKmsg(path) }
	t.Cleanup(func() { p.Close() })
	if err := sdktest.Configure(t, p, nil, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	c = p.cfg
	if c.DiskDevices != defaultDiskDevices || !slices.Equal(c.FilesystemTypes, defaultFilesystemTypes) ||
		c.MountPointsExclude != defaultMountPointsExclude || c.StatfsTimeout.Duration != defaultStatfsTimeout ||
		opened != defaultKmsgPath {
		t.Errorf("defaults %+v (kmsg opened: %q)", c, opened)
	}
	for _, disk := range []string{"vda", "vdaa", "xvdb", "sdc", "nvme0n1", "nvme12n3"} {
		if !c.diskRE.MatchString(disk) {
			t.Errorf("default disk_devices does not match %s", disk)
		}
	}
	for _, other := range []string{"vda1", "nvme0n1p1", "loop0", "sr0", "dm-0", "zram0"} {
		if c.diskRE.MatchString(other) {
			t.Errorf("default disk_devices matches %s", other)
		}
	}

	// kmsg off: the log is not opened.
	p = newPlugin()
	opened = ""
	p.openKmsg = func(path string) (io.ReadCloser, error) { opened = path; return quietKmsg(path) }
	if err := sdktest.Configure(t, p, map[string]any{"kmsg": false, "kmsg_path": ""}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if opened != "" || p.tailer != nil {
		t.Errorf("kmsg: false opened %q", opened)
	}
}

// TestConfigureRejects: each bad setting is refused with a message that
// names its key.
func TestConfigureRejects(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"disk_devices": "("}, Key: "disk_devices", Detail: "missing closing )"},
		{Raw: map[string]any{"mount_points_exclude": "[a"}, Key: "mount_points_exclude", Detail: "missing closing ]"},
		{Raw: map[string]any{"filesystem_types": []any{"ext4", " "}}, Key: "filesystem_types[1]", Detail: "empty filesystem type"},
		{Raw: map[string]any{"filesystem_types": []any{"ext4,xfs"}}, Key: "filesystem_types[0]", Detail: "is not a filesystem type name"},
		{Raw: map[string]any{"filesystem_types": "ext4"}, Key: "filesystem_types", Detail: ": got "},
		{Raw: map[string]any{"mountinfo_pid": -1}, Key: "mountinfo_pid", Detail: "-1 is not a process id"},
		{Raw: map[string]any{"mountinfo_pid": "init"}, Key: "mountinfo_pid", Detail: ": got "},
		{Raw: map[string]any{"statfs_timeout": "1ms"}, Key: "statfs_timeout", Detail: "below the minimum of 10ms"},
		{Raw: map[string]any{"statfs_timeout": "soon"}, Key: "statfs_timeout", Detail: "invalid duration"},
		{Raw: map[string]any{"statfs_timeout": true}, Key: "statfs_timeout", Detail: "neither a duration string"},
		{Raw: map[string]any{"kmsg_path": ""}, Key: "kmsg_path", Detail: "must not be empty"},
		{Raw: map[string]any{"kmsg": "yes"}, Key: "kmsg", Detail: ": got "},
		{Raw: map[string]any{"unknown_key": 1}, Key: "unknown_key", Detail: "unknown key"},
	})
}

// TestProbeKeysWarn: the probe keys moved with the probes to the probe
// plugin. A section that still sets one starts guest (its own families go
// on) with a warning per key that names the new place, whatever the value.
func TestProbeKeysWarn(t *testing.T) {
	raw := map[string]any{
		"probe_interval": "5m", "probe_timeout": "10s", "icmp_targets": []any{"10.0.0.1"},
		"nfs_probe": false, "https_endpoints": []any{}, "kmsg": false,
	}
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: raw, AllowUndeclared: true})
	if len(res.Warnings) != len(movedToProbe) {
		t.Fatalf("%d warnings for %d moved keys: %q", len(res.Warnings), len(movedToProbe), res.Warnings)
	}
	for i, k := range movedToProbe {
		if w := res.Warnings[i]; !strings.HasPrefix(w, k+": ignored") || !strings.Contains(w, "set "+k+" under plugins.probe.config") {
			t.Errorf("warning for %s: %q", k, w)
		}
	}
	// A section without them: no warning.
	res = sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{"kmsg": false}, AllowUndeclared: true})
	if len(res.Warnings) != 0 {
		t.Errorf("warnings without probe keys: %q", res.Warnings)
	}
}

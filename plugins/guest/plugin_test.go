package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fakeRootfs is the host root the fixture tests hand the plugin, so that a
// statfs path shows it was joined to the mount point.
const fakeRootfs = "/host"

// fakeFilesystems are the statfs answers for the fixtures' mounts, by path
// under fakeRootfs: 4 KiB blocks, the NFS mounts with the 1 MiB fragment
// size a server reports.
var fakeFilesystems = map[string]fsUsage{
	"/host":                    {blocks: 7864320, free: 5242880, avail: 4849664, blockSize: 4096, files: 1966080, filesFree: 1700000},
	"/host/data":               {blocks: 268435456, free: 67108864, avail: 67108864, blockSize: 4096, files: 134217728, filesFree: 134000000},
	"/host/mnt/scratch space":  {blocks: 900000000, free: 899000000, avail: 853000000, blockSize: 4096, files: 225000000, filesFree: 224999000},
	"/host/mnt/shared":         {blocks: 10485760, free: 5242880, avail: 5242880, blockSize: 1 << 20, files: 0, filesFree: 0},
	"/host/mnt/models":         {blocks: 2097152, free: 1048576, avail: 1048576, blockSize: 1 << 20, files: 1 << 30, filesFree: 1<<30 - 5000},
	"/host/var/lib/containers": {blocks: 1, free: 1, avail: 1, blockSize: 1}, // a bind mount of /data: never asked
}

// fakeStatfs answers from fakeFilesystems and records the calls.
type fakeStatfs struct {
	mu    sync.Mutex
	calls map[string]int
	// block, when set for a path, is waited on before answering (a hung
	// NFS server).
	block map[string]chan struct{}
	// missing paths fail as if they did not exist.
	missing map[string]bool
}

func (f *fakeStatfs) statfs(path string) (fsUsage, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[path]++
	ch, missing := f.block[path], f.missing[path]
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
	u, ok := fakeFilesystems[path]
	if !ok || missing {
		return fsUsage{}, fmt.Errorf("statfs %s: no such file or directory", path)
	}
	return u, nil
}

func (f *fakeStatfs) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[path]
}

// quietKmsg is a kernel log that never says anything until closed.
func quietKmsg(string) (io.ReadCloser, error) {
	r, _ := io.Pipe()
	return r, nil
}

// fixturePlugin is a plugin whose statfs and kernel log are fakes.
func fixturePlugin(t *testing.T, fs *fakeStatfs) *plugin {
	p := newPlugin()
	p.statfs = newStatfsRunner(fs.statfs, time.Now)
	p.openKmsg = quietKmsg
	t.Cleanup(func() { p.Close() })
	return p
}

func fixtureOptions(t *testing.T, archive string, config map[string]any) sdktest.Options {
	root := sdktest.Unpack(t, filepath.Join("testdata", archive+".ttar"))
	return sdktest.Options{Procfs: root + "/proc", Sysfs: root + "/sys", Rootfs: fakeRootfs, Config: config}
}

// mustContain fails for each of lines the exposition does not have as a
// whole line (sdktest.Contains would also accept a longer value).
func mustContain(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains("\n"+text, "\n"+l+"\n") {
			t.Errorf("exposition lacks the line %q", l)
		}
	}
}

func lint(t *testing.T, text string) {
	t.Helper()
	sdktest.PromtoolClean(t, text, nil) // no seed name draws a finding
}

// TestGoldenVM: a current kernel (20-field diskstats, PSI for cpu, io and
// memory) with virtio, NVMe and NFS storage.
func TestGoldenVM(t *testing.T) {
	fs := &fakeStatfs{}
	res := sdktest.Run(t, fixturePlugin(t, fs), fixtureOptions(t, "vm", nil))
	text := sdktest.CleanGolden(t, res, filepath.Join("testdata", "vm.golden"))
	lint(t, text)
	mustContain(t, text,
		// steal: 52310 jiffies at USER_HZ 100; online vCPUs: the cpuN lines.
		"cpu_steal_seconds_total 523.1",
		"cpus_online 4",
		"procs_running 3",
		"procs_blocked 2",
		// PSI: percent to ratio, microseconds to seconds.
		`psi_cpu_ratio{scope="some",window="10"} 0.125`,
		`psi_io_stall_seconds_total{scope="full"} 40.122019`,
		`psi_memory_stall_seconds_total{scope="full"} 0.3`,
		// meminfo: kB to bytes; swap used = total - free.
		"mem_available_bytes 1.0670309376e+10",
		"swap_used_bytes 5.36870912e+08",
		// whole disks only: vda, vdb, nvme0n1; milliseconds to seconds,
		// sectors to bytes.
		`diskstats_read_time_seconds_total{device="vda"} 799.844`,
		`diskstats_written_bytes_total{device="vdb"} 4.943771136e+10`,
		`diskstats_flushes_completed_total{device="nvme0n1"} 40220`,
		`diskstats_discards_completed_total{device="vda"} 10`,
		// statfs: size = blocks x fragment size, used = blocks - free.
		`disk_size_bytes{device="vda1",mount_point="/",fstype="ext4"} 3.221225472e+10`,
		`disk_used_bytes{device="vda1",mount_point="/",fstype="ext4"} 1.073741824e+10`,
		`disk_inodes_used{device="10.0.5.21:/vol/models",mount_point="/mnt/models",fstype="nfs"} 5000`,
		`disk_available_bytes{device="nvme0n1p1",mount_point="/mnt/scratch space",fstype="ext4"} 3.493888e+12`,
		"kernel_soft_lockups_total 0",
		`guest_collection_errors_total{collector="kmsg"} 0`)
	sdktest.Lacks(t, text,
		`device="vda1"}`, `device="nvme0n1p1"}`, `device="loop0"`, `device="sr0"`, // partitions, loops, optical
		`mount_point="/var/lib/containers"`, // the bind mount of /data
		`mount_point="/run"`, `mount_point="/sys/fs/bpf"`, `mount_point="/proc"`)
	if n := fs.count("/host/var/lib/containers"); n != 0 {
		t.Errorf("statfs on the bind mount /var/lib/containers: %d calls, want none", n)
	}
}

// TestGoldenOldKernelWithoutPSI: a kernel before 4.18 (14-field diskstats)
// without PSI: no pressure series and no error, no discard or flush
// series (the fields do not exist), the rest as usual.
func TestGoldenOldKernelWithoutPSI(t *testing.T) {
	res := sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), fixtureOptions(t, "oldkernel-nopsi", nil))
	text := sdktest.CleanGolden(t, res, filepath.Join("testdata", "oldkernel-nopsi.golden"))
	lint(t, text)
	sdktest.Lacks(t, text, "psi_", "diskstats_discards_completed_total", "diskstats_flushes_completed_total")
	mustContain(t, text,
		`diskstats_reads_completed_total{device="vda"} 1.450571e+06`,
		`diskstats_io_time_seconds_total{device="vdb"} 301.22`,
		`guest_collection_errors_total{collector="pressure_io"} 0`)
}

// TestBadInput: a PSI line of an unknown shape fails that resource's file
// only; a PSI line of an unknown kind is skipped; a diskstats line too
// short to parse is one error naming the line; an 18-field line has
// discards but no flushes. Each is a counted partial error, never a failed
// scrape.
func TestBadInput(t *testing.T) {
	res := sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), fixtureOptions(t, "bad-input", nil))
	if res.Status != nil {
		t.Fatalf("collect failed: %v", res.Status)
	}
	got := map[string]int{}
	for _, e := range res.Errors {
		got[e.GetCollector()]++
		t.Logf("partial error: %s: %s", e.GetCollector(), e.GetMessage())
	}
	if len(res.Errors) != 2 || got[collectorPressureIO] != 1 || got[collectorDiskstats] != 1 {
		t.Errorf("partial errors %v, want one pressure_io and one diskstats", got)
	}
	text := res.Text(t)
	lint(t, text)
	sdktest.Lacks(t, text, "psi_io_", `device="vdb"}`, `diskstats_flushes_completed_total{device="vda"}`)
	mustContain(t, text,
		`psi_memory_ratio{scope="some",window="10"} 0.005`,
		`psi_cpu_ratio{scope="some",window="60"} 0.0825`,
		`diskstats_discards_completed_total{device="vda"} 10`,
		`diskstats_flushes_completed_total{device="nvme0n1"} 40220`,
		`guest_collection_errors_total{collector="pressure_io"} 1`,
		`guest_collection_errors_total{collector="pressure_memory"} 0`,
		`guest_collection_errors_total{collector="diskstats"} 1`)
	for _, e := range res.Errors {
		if e.GetCollector() == collectorPressureIO && !strings.Contains(e.GetMessage(), "/proc/pressure/io: ") {
			t.Errorf("pressure error %q does not name the file", e.GetMessage())
		}
		if e.GetCollector() == collectorDiskstats && !strings.Contains(e.GetMessage(), "diskstats line 3: 13 fields, the kernel prints at least 14: \" 253      16 vdb ") {
			t.Errorf("diskstats error %q does not name the file, the line and the disk", e.GetMessage())
		}
	}
}

// TestDiskstatsMalformedLine: a line of /proc/diskstats that cannot be
// read costs that line only: one diskstats error naming the file and the
// line, and every disk listed before and after it keeps its series.
func TestDiskstatsMalformedLine(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		line           int
		lost           []string // disks without series
	}{
		{"a field not a number", " vda 1450571 ", " vda 14505x1 ", 2, []string{"vda"}},
		{"a truncated line", " vdb 90210 12 7308200 120456 441200 9120 96558030 1501223 2 301220 1621679 0 0 0 0 11020 2201", " vdb 90210 12", 6, []string{"vdb"}},
		{"a line that is no disk", "  11       0 sr0", "garbage\n  11       0 sr0", 9, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := fixtureOptions(t, "vm", map[string]any{"disk_devices": ".*"})
			path := filepath.Join(opts.Procfs, "diskstats")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tc.old) {
				t.Fatalf("fixture lacks %q", tc.old)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(data), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			res := sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), opts)
			var msgs []string
			for _, e := range res.Errors {
				if e.GetCollector() == collectorDiskstats {
					msgs = append(msgs, e.GetMessage())
				}
			}
			if want := fmt.Sprintf("%s line %d: ", path, tc.line); len(msgs) != 1 || !strings.Contains(msgs[0], want) {
				t.Errorf("diskstats errors %q, want one naming %q", msgs, want)
			}
			text := res.Text(t)
			mustContain(t, text, `guest_collection_errors_total{collector="diskstats"} 1`)
			// The fixture's values of every whole disk.
			for dev, reads := range map[string]string{"loop0": "52", "vda": "1.450571e+06", "vdb": "90210", "nvme0n1": "5.120334e+06", "sr0": "12"} {
				if slices.Contains(tc.lost, dev) {
					sdktest.Lacks(t, text, `device="`+dev+`"}`)
					continue
				}
				mustContain(t, text, `diskstats_reads_completed_total{device="`+dev+`"} `+reads)
			}
		})
	}
}

// TestDiskDevicesRegex: disk_devices selects among the whole disks; a
// regex that would match partitions still gets whole disks only.
func TestDiskDevicesRegex(t *testing.T) {
	res := sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), fixtureOptions(t, "vm", map[string]any{"disk_devices": ".*"}))
	text := res.Text(t)
	mustContain(t, text, `diskstats_reads_completed_total{device="loop0"} 52`, `diskstats_reads_completed_total{device="sr0"} 12`)
	sdktest.Lacks(t, text, `device="vda1"}`, `device="vda14"}`, `device="nvme0n1p1"}`)

	res = sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), fixtureOptions(t, "vm", map[string]any{"disk_devices": "^nvme"}))
	text = res.Text(t)
	sdktest.Contains(t, text, `diskstats_reads_completed_total{device="nvme0n1"}`)
	sdktest.Lacks(t, text, `diskstats_reads_completed_total{device="vda"}`)
}

// TestAllowlistPushdown: with no filesystem family enabled no statfs is
// made.
func TestAllowlistPushdown(t *testing.T) {
	fs := &fakeStatfs{}
	opts := fixtureOptions(t, "vm", nil)
	opts.DisabledMetrics = []string{"disk_used_bytes", "disk_available_bytes", "disk_size_bytes", "disk_inodes_used", "disk_inodes"}
	res := sdktest.Run(t, fixturePlugin(t, fs), opts)
	if len(res.Errors) != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	if n := fs.count("/host"); n != 0 {
		t.Errorf("statfs called %d times with the filesystem families disabled", n)
	}
	sdktest.Contains(t, res.Text(t), `diskstats_reads_completed_total{device="vda"}`)
}

// TestMissingSources: a procfs without the files is one counted partial
// error per source, never a failed scrape.
func TestMissingSources(t *testing.T) {
	empty := t.TempDir()
	res := sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), sdktest.Options{Procfs: empty, Sysfs: empty, Rootfs: fakeRootfs})
	if res.Status != nil {
		t.Fatalf("collect failed: %v", res.Status)
	}
	got := map[string]int{}
	for _, e := range res.Errors {
		got[e.GetCollector()]++
	}
	for _, c := range []string{collectorStat, collectorMeminfo, collectorDiskstats, collectorFilesystem} {
		if got[c] != 1 {
			t.Errorf("%s: %d partial errors, want 1 (all: %v)", c, got[c], got)
		}
	}
	if got[collectorPressureCPU]+got[collectorPressureIO]+got[collectorPressureMemory] != 0 {
		t.Errorf("a kernel without PSI must not be an error: %v", got)
	}
	mustContain(t, res.Text(t), `guest_collection_errors_total{collector="stat"} 1`)
}

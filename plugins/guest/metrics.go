package main

import (
	"github.com/plexporter/plexporter/plugins/internal/guesterrors"
	"github.com/plexporter/plexporter/sdk"
)

// CPU and run queue (<procfs>/stat).
var (
	descCPUSteal = sdk.NewDesc("cpu_steal_seconds_total", sdk.Counter,
		"Time the vCPUs were runnable but the hypervisor ran something else, summed over vCPUs (the cpu line of /proc/stat, USER_HZ 100).").WithUnit("seconds")
	descCPUCount = sdk.NewDesc("cpus_online", sdk.Gauge,
		"Online vCPUs (the cpuN lines of /proc/stat; named without the _count suffix promtool reserves for histograms and summaries).")
	descProcsRunning = sdk.NewDesc("procs_running", sdk.Gauge,
		"Runnable tasks (R state), from procs_running of /proc/stat.")
	descProcsBlocked = sdk.NewDesc("procs_blocked", sdk.Gauge,
		"Tasks blocked on I/O (D state), from procs_blocked of /proc/stat.")
)

// Pressure stall information (<procfs>/pressure/{cpu,io,memory}), one pair
// of families per resource.
var (
	descPSICPURatio = sdk.NewDesc("psi_cpu_ratio", sdk.Gauge,
		"Share of wall time (0-1) in which some (or, scope=full, all) non-idle tasks waited for a CPU, averaged over the window in seconds.",
		"scope", "window").WithUnit("ratio")
	descPSICPUStall = sdk.NewDesc("psi_cpu_stall_seconds_total", sdk.Counter,
		"Time in which some (or all) non-idle tasks waited for a CPU.", "scope").WithUnit("seconds")
	descPSIIORatio = sdk.NewDesc("psi_io_ratio", sdk.Gauge,
		"Share of wall time (0-1) in which some (or, scope=full, all) non-idle tasks waited for I/O, averaged over the window in seconds.",
		"scope", "window").WithUnit("ratio")
	descPSIIOStall = sdk.NewDesc("psi_io_stall_seconds_total", sdk.Counter,
		"Time in which some (or all) non-idle tasks waited for I/O.", "scope").WithUnit("seconds")
	descPSIMemoryRatio = sdk.NewDesc("psi_memory_ratio", sdk.Gauge,
		"Share of wall time (0-1) in which some (or, scope=full, all) non-idle tasks waited for memory (reclaim, refaults, swap-in), averaged over the window in seconds.",
		"scope", "window").WithUnit("ratio")
	descPSIMemoryStall = sdk.NewDesc("psi_memory_stall_seconds_total", sdk.Counter,
		"Time in which some (or all) non-idle tasks waited for memory.", "scope").WithUnit("seconds")
)

// Memory (<procfs>/meminfo).
var (
	descMemAvailable = sdk.NewDesc("mem_available_bytes", sdk.Gauge,
		"Memory available for new allocations without swapping (MemAvailable of /proc/meminfo).").WithUnit("bytes")
	descSwapUsed = sdk.NewDesc("swap_used_bytes", sdk.Gauge,
		"Swap in use: SwapTotal - SwapFree of /proc/meminfo.").WithUnit("bytes")
)

// Whole disks (<procfs>/diskstats), label device.
var (
	descDiskReads = sdk.NewDesc("diskstats_reads_completed_total", sdk.Counter,
		"Reads completed.", "device")
	descDiskWrites = sdk.NewDesc("diskstats_writes_completed_total", sdk.Counter,
		"Writes completed.", "device")
	descDiskReadTime = sdk.NewDesc("diskstats_read_time_seconds_total", sdk.Counter,
		"Time spent on reads, summed over the reads (the kernel counts milliseconds).", "device").WithUnit("seconds")
	descDiskWriteTime = sdk.NewDesc("diskstats_write_time_seconds_total", sdk.Counter,
		"Time spent on writes, summed over the writes (the kernel counts milliseconds).", "device").WithUnit("seconds")
	descDiskReadBytes = sdk.NewDesc("diskstats_read_bytes_total", sdk.Counter,
		"Bytes read (sectors x 512).", "device").WithUnit("bytes")
	descDiskWrittenBytes = sdk.NewDesc("diskstats_written_bytes_total", sdk.Counter,
		"Bytes written (sectors x 512).", "device").WithUnit("bytes")
	descDiskIOTime = sdk.NewDesc("diskstats_io_time_seconds_total", sdk.Counter,
		"Time the disk had I/O in flight (utilisation: rate() of it, 0-1).", "device").WithUnit("seconds")
	descDiskIOsInProgress = sdk.NewDesc("diskstats_ios_in_progress", sdk.Gauge,
		"I/Os in flight at the time of the scrape.", "device")
	descDiskDiscards = sdk.NewDesc("diskstats_discards_completed_total", sdk.Counter,
		"Discards completed (kernel 4.18 and later: a diskstats line of 18 or more fields).", "device")
	descDiskFlushes = sdk.NewDesc("diskstats_flushes_completed_total", sdk.Counter,
		"Flush requests completed (kernel 5.5 and later: a diskstats line of 20 fields).", "device")
)

// Filesystem usage (statfs on the mounts of <procfs>/self/mountinfo),
// labels device, mount_point, fstype.
var (
	descFSUsed = sdk.NewDesc("disk_used_bytes", sdk.Gauge,
		"Bytes in use on the filesystem (blocks - free blocks).", "device", "mount_point", "fstype").WithUnit("bytes")
	descFSAvailable = sdk.NewDesc("disk_available_bytes", sdk.Gauge,
		"Bytes an unprivileged user can still write (what df shows as available; excludes the blocks reserved for root).", "device", "mount_point", "fstype").WithUnit("bytes")
	descFSSize = sdk.NewDesc("disk_size_bytes", sdk.Gauge,
		"Size of the filesystem.", "device", "mount_point", "fstype").WithUnit("bytes")
	descFSInodesUsed = sdk.NewDesc("disk_inodes_used", sdk.Gauge,
		"Inodes in use (files - free files).", "device", "mount_point", "fstype")
	descFSInodes = sdk.NewDesc("disk_inodes", sdk.Gauge,
		"Inodes of the filesystem (0 for filesystems without a fixed inode table, like btrfs).", "device", "mount_point", "fstype")
)

// Kernel log (/dev/kmsg).
var descSoftLockups = sdk.NewDesc("kernel_soft_lockups_total", sdk.Counter,
	"Soft-lockup reports of the kernel watchdog (\"BUG: soft lockup - CPU#N stuck for Ns!\") since the plugin started; a CPU that stays stuck is reported again every watchdog period.")

// Plugin health: the project's error-counter convention,
// guest_collection_errors_total{collector}.
// Shared with the probe plugin, which counts a probe that could not be made
// under collector="probe" (plugins/internal/guesterrors).
var descCollectionErrors = guesterrors.Desc()

// Collector names: the collector label of guest_collection_errors_total and
// of the partial errors sent to the host.
const (
	collectorStat           = "stat"
	collectorPressureCPU    = "pressure_cpu"
	collectorPressureIO     = "pressure_io"
	collectorPressureMemory = "pressure_memory"
	collectorMeminfo        = "meminfo"
	collectorDiskstats      = "diskstats"
	collectorFilesystem     = "filesystem"
	collectorKmsg           = "kmsg"
)

// errorCollectors are the collector label values, exported from the first
// scrape on (kmsg only while the tailer is configured; probe is the probe
// plugin's).
var errorCollectors = []string{
	collectorStat, collectorPressureCPU, collectorPressureIO, collectorPressureMemory,
	collectorMeminfo, collectorDiskstats, collectorFilesystem,
}

// psiResources are the files of <procfs>/pressure, with their families and
// collector.
var psiResources = []struct {
	name, collector string
	ratio, stall    *sdk.Desc
}{
	{"cpu", collectorPressureCPU, descPSICPURatio, descPSICPUStall},
	{"io", collectorPressureIO, descPSIIORatio, descPSIIOStall},
	{"memory", collectorPressureMemory, descPSIMemoryRatio, descPSIMemoryStall},
}

// diskDescs are the diskstats families; when the allowlist disables all of
// them diskstats is not read.
var diskDescs = []*sdk.Desc{
	descDiskReads, descDiskWrites, descDiskReadTime, descDiskWriteTime, descDiskReadBytes, descDiskWrittenBytes,
	descDiskIOTime, descDiskIOsInProgress, descDiskDiscards, descDiskFlushes,
}

// filesystemDescs are the statfs families; when the allowlist disables all
// of them no statfs is made.
var filesystemDescs = []*sdk.Desc{descFSUsed, descFSAvailable, descFSSize, descFSInodesUsed, descFSInodes}

// catalogue is every family the plugin writes, returned by Info.
var catalogue = append([]*sdk.Desc{
	descCPUSteal, descCPUCount, descProcsRunning, descProcsBlocked,
	descPSICPURatio, descPSICPUStall, descPSIIORatio, descPSIIOStall, descPSIMemoryRatio, descPSIMemoryStall,
	descMemAvailable, descSwapUsed, descSoftLockups, descCollectionErrors,
}, append(diskDescs, filesystemDescs...)...)

package scrape

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// processCollector exports client_golang's process_* families, the same
// names, help, types and values as collectors.NewProcessCollector, at
// less of the host's fixed cost per scrape: client_golang reads the whole
// of /proc/stat on every scrape for the boot time behind
// process_start_time_seconds, and parses /proc/self/limits for two
// numbers. Here the start time is computed once — the process started
// once; only a step of the wall clock would have moved client_golang's
// figure, which is boot time plus ticks since boot — and the limits come
// from getrlimit(2), which /proc/self/limits prints (soft limits,
// RLIM_INFINITY as 2^64-1 either way), so a limit changed with prlimit
// shows on the next scrape as before. /proc/self/stat and /proc/self/fd
// are read on every scrape, as client_golang does.
//
// client_golang's process_network_receive_bytes_total and
// process_network_transmit_bytes_total are left out. They are the IpExt
// octets of /proc/self/net/netstat: the traffic of the whole network
// namespace, not of the process (for a host on the node's network, all of
// the node's traffic, which node_exporter exports as
// node_netstat_IpExt_InOctets), and a 0 where the kernel prints no IpExt
// line. Reading them was the largest part of this collector's cost: the
// kernel formats all of netstat's ~140 fields for two (about 0.1 ms a
// scrape; docs/design.md).
//
// Where /proc cannot be read it is client_golang's collector: the same
// families, or none, as before.
type processCollector struct {
	proc procfs.Proc

	cpuTotal, openFDs, maxFDs, vsize, maxVsize, rss, startTime *prometheus.Desc

	mu    sync.Mutex
	start float64 // process_start_time_seconds, once known
}

// newProcessCollector returns the collector of the host's own process.
func newProcessCollector() prometheus.Collector {
	p, err := procfs.Self()
	if err != nil {
		return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &processCollector{
		proc:      p,
		cpuTotal:  desc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds."),
		openFDs:   desc("process_open_fds", "Number of open file descriptors."),
		maxFDs:    desc("process_max_fds", "Maximum number of open file descriptors."),
		vsize:     desc("process_virtual_memory_bytes", "Virtual memory size in bytes."),
		maxVsize:  desc("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes."),
		rss:       desc("process_resident_memory_bytes", "Resident memory size in bytes."),
		startTime: desc("process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
	}
}

func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpuTotal, c.openFDs, c.maxFDs, c.vsize, c.maxVsize, c.rss, c.startTime} {
		ch <- d
	}
}

// Collect leaves out what it cannot read, as client_golang's collector
// does without ReportErrors.
func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	if stat, err := c.proc.Stat(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.cpuTotal, prometheus.CounterValue, stat.CPUTime())
		ch <- prometheus.MustNewConstMetric(c.vsize, prometheus.GaugeValue, float64(stat.VirtualMemory()))
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(stat.ResidentMemory()))
		if start, ok := c.startTimeOf(stat); ok {
			ch <- prometheus.MustNewConstMetric(c.startTime, prometheus.GaugeValue, start)
		}
	}
	if fds, err := c.proc.FileDescriptorsLen(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.openFDs, prometheus.GaugeValue, float64(fds))
	}
	var files, as unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &files) == nil && unix.Getrlimit(unix.RLIMIT_AS, &as) == nil {
		ch <- prometheus.MustNewConstMetric(c.maxFDs, prometheus.GaugeValue, float64(files.Cur))
		ch <- prometheus.MustNewConstMetric(c.maxVsize, prometheus.GaugeValue, float64(as.Cur))
	}
}

// startTimeOf is the process's start time, computed (from /proc/stat's
// boot time) on the first scrape that can and kept.
func (c *processCollector) startTimeOf(stat procfs.ProcStat) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start == 0 {
		start, err := stat.StartTime()
		if err != nil {
			return 0, false
		}
		c.start = start
	}
	return c.start, true
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/plexporter/plexporter/plugins/internal/rdmanl"
	"github.com/plexporter/plexporter/sdk"
)

// plugin publishes who uses each device as info series: pods from the
// kubelet's pod-resources API, Slurm jobs from a job-mapping directory.
type plugin struct {
	now  func() time.Time
	dial func() (rdmanl.Conn, error) // RDMA netlink, for rdma_qp_owners
	proc procfsReader                // /proc/<pid> reads (tests make processes vanish or refuse)

	// The counters outlive a re-Configure, so they never go back.
	errs       sdk.CollectionErrors // attribution_collection_errors_total, by collector
	limits     sdk.Counts           // attribution_limit_reached_total, by limit
	unreadable atomic.Uint64        // attribution_unreadable_fd_dirs_total

	mu         sync.Mutex
	resolver   resolver
	pods       *podResources // nil: Kubernetes attribution off
	jobMapping string        // "" : Slurm job mapping off
	sources    []string      // collectors of the configured sources, for attribution_collection_errors_total
	limitNames []string      // the bounds of the configured sources, for attribution_limit_reached_total
	cgroupJobs *cgroupJobs   // nil: off
	qpOwners   *qpOwners     // nil: off
}

// cgroupJobs is the configured process scan behind device_cgroup_job_info.
type cgroupJobs struct {
	procfs             string
	maxPids, maxSeries int
}

func newPlugin() *plugin {
	return &plugin{now: time.Now, proc: osProcfs{}, dial: func() (rdmanl.Conn, error) { return netlink.Dial(rdmanl.Family, nil) }}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "attribution",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{
			Capabilities:  []string{"CAP_DAC_OVERRIDE"},
			ReadOnlyPaths: []string{"/sys/bus/pci/devices", "/sys/class/infiniband", "/sys/class/net", "/sys/class/nvme", "/sys/devices"},
		},
	}
}

// Configure validates the settings. Nothing is dialled or read here: a
// kubelet that is not up yet is a collect error, not a plugin kept out.
func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resolver = resolver{sysfs: cfg.Paths.Sysfs}
	p.pods = nil
	// Allowlist pushdown: nobody wants the pod families, so the kubelet
	// is never asked.
	if sock := c.socket(); sock != "" && cfg.AnyEnabled(descDevicePod, descDeviceAllocatable) {
		if _, err := os.Stat(underRoot(cfg.Paths.Rootfs, sock)); errors.Is(err, fs.ErrNotExist) {
			cfg.Warn("pod_resources_socket: %s does not exist: no kubelet on this node yet, or it serves another path; device_pod_info appears once it does (set pod_resources_socket to \"\" on nodes without Kubernetes)", underRoot(cfg.Paths.Rootfs, sock))
		}
		p.pods = &podResources{socket: underRoot(cfg.Paths.Rootfs, sock), ttl: c.CacheTTL.Duration, timeout: c.CallTimeout.Duration, now: p.now}
	}
	// The error counter's collectors follow the configured sources, not
	// the allowlist, so that an allowlist of only the counter still gets it.
	p.sources = nil
	if c.socket() != "" {
		p.sources = append(p.sources, collectorPodResources, collectorAllocatable)
	}
	if c.JobMappingDir != "" {
		p.sources = append(p.sources, collectorJobMapping)
	}
	p.jobMapping = ""
	if cfg.Enabled(descDeviceJob) {
		p.jobMapping = underRoot(cfg.Paths.Rootfs, c.JobMappingDir)
	}
	p.limitNames = nil
	if c.CgroupJobs {
		p.sources = append(p.sources, collectorCgroupJobs)
		p.limitNames = append(p.limitNames, limitMaxPids, limitCgroupSeries, limitFDsPerProcess)
	}
	p.cgroupJobs = nil
	if c.CgroupJobs && cfg.Enabled(descDeviceCgroupJob) {
		p.cgroupJobs = &cgroupJobs{procfs: cfg.Paths.Procfs, maxPids: c.CgroupJobsMaxPids, maxSeries: c.CgroupJobsMaxSeries}
	}
	if c.RDMAQPOwners {
		p.sources = append(p.sources, collectorRDMAQPOwners)
		p.limitNames = append(p.limitNames, limitQPOwnerSeries)
	}
	p.qpOwners = nil
	if c.RDMAQPOwners && cfg.AnyEnabled(descRDMAQPOwner, descRDMAQPOwnerQPs) {
		p.qpOwners = &qpOwners{procfs: cfg.Paths.Procfs, maxSeries: c.RDMAQPOwnersMaxSeries, dial: p.dial}
	}
	return nil
}

// Collect writes the info series of every enabled source; one source
// failing costs only its own series.
func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	res, pods, jobDir, collectors, limits := p.resolver, p.pods, p.jobMapping, p.sources, p.limitNames
	scan, qps := p.cgroupJobs, p.qpOwners
	p.mu.Unlock()

	defer func() { p.writeErrors(w, collectors, limits) }()
	if pods != nil {
		s, err := pods.snapshot(ctx)
		if err != nil {
			return err // the scrape's own deadline
		}
		p.writePods(w, res, s)
	}
	if jobDir != "" {
		jobs, errs := readJobMapping(jobDir)
		for _, err := range errs {
			p.errs.Fail(w, collectorJobMapping, err)
		}
		for _, j := range jobs {
			w.Gauge(descDeviceJob, 1, j.Device, j.JobID)
		}
	}
	if scan != nil {
		p.writeCgroupJobs(w, res, scan)
	}
	if qps != nil {
		p.writeQPOwners(ctx, w, qps)
	}
	return nil
}

// writeCgroupJobs scans procfs for the devices processes of Slurm jobs
// hold open and writes device_cgroup_job_info.
func (p *plugin) writeCgroupJobs(w *sdk.Writer, res resolver, c *cgroupJobs) {
	s, err := scanDeviceJobs(p.proc, c.procfs, newDeviceFiles(res), c.maxPids)
	if err != nil {
		p.errs.Fail(w, collectorCgroupJobs, err)
		return
	}
	if s.PidsCapped {
		p.limits.Add(limitMaxPids, 1)
	}
	if s.FDsCapped > 0 {
		p.limits.Add(limitFDsPerProcess, 1)
	}
	if s.Unreadable > 0 {
		p.unreadable.Add(uint64(s.Unreadable))
		hint := ""
		if errors.Is(s.UnreadableErr, fs.ErrPermission) {
			hint = ": reading other users' fds needs CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, and no Landlock sandbox (README.md, What it needs)"
		}
		p.errs.Fail(w, collectorCgroupJobs, fmt.Errorf("%d of %d processes of Slurm jobs: their devices are not known (%w)%s", s.Unreadable, s.JobProcesses, s.UnreadableErr, hint))
	}
	if s.CgroupUnreadable > 0 {
		p.errs.Fail(w, collectorCgroupJobs, fmt.Errorf("%d of %d processes: their cgroup is not known (%w)", s.CgroupUnreadable, s.ProcessesRead, s.CgroupErr))
	}
	for i, u := range s.Uses {
		if i == c.maxSeries {
			p.limits.Add(limitCgroupSeries, 1)
			break
		}
		w.Gauge(descDeviceCgroupJob, 1, u.Kind, u.Device, u.JobID)
	}
}

// writePods writes one kubelet answer, each device ID resolved through
// sysfs at this scrape.
func (p *plugin) writePods(w *sdk.Writer, res resolver, s *podSnapshot) {
	if s.ListErr != nil {
		p.errs.Fail(w, collectorPodResources, s.ListErr)
	}
	if s.AllocatableErr != nil {
		p.errs.Fail(w, collectorAllocatable, s.AllocatableErr)
	}
	// Two allocations may resolve to one series (a netdev named in one
	// resource and found behind a PCI function of another): written once.
	seen := map[[7]string]bool{}
	if w.Enabled(descDevicePod) {
		for _, a := range s.Allocations {
			for _, d := range res.resolve(a.DeviceID) {
				k := [7]string{d.Kind, d.Name, d.PCIAddr, a.Resource, a.Namespace, a.Pod, a.Container}
				if !seen[k] {
					seen[k] = true
					w.Gauge(descDevicePod, 1, k[:]...)
				}
			}
		}
	}
	if w.Enabled(descDeviceAllocatable) {
		for _, a := range s.Allocatable {
			for _, d := range res.resolve(a.DeviceID) {
				k := [7]string{d.Kind, d.Name, d.PCIAddr, a.Resource}
				if !seen[k] {
					seen[k] = true
					w.Gauge(descDeviceAllocatable, 1, k[:4]...)
				}
			}
		}
	}
}

// writeErrors writes attribution_collection_errors_total for the
// collectors of the enabled sources and attribution_limit_reached_total
// for their bounds, from the first scrape on.
func (p *plugin) writeErrors(w *sdk.Writer, collectors, limits []string) {
	p.errs.Write(w, descCollectionErrors, collectors...)
	p.limits.Write(w, descLimitReached, limits...)
	if slices.Contains(collectors, collectorCgroupJobs) {
		w.Counter(descUnreadableFDDirs, float64(p.unreadable.Load()))
	}
}

// writeQPOwners dumps the queue pairs of every RDMA device and writes
// their owners.
func (p *plugin) writeQPOwners(ctx context.Context, w *sdk.Writer, q *qpOwners) {
	c, err := q.dial()
	if err != nil {
		p.errs.Fail(w, collectorRDMAQPOwners, fmt.Errorf("rdma netlink: %w", err))
		return
	}
	defer c.Close()
	qps, errs := dumpQueuePairs(ctx, c)
	for _, err := range errs {
		p.errs.Fail(w, collectorRDMAQPOwners, err)
	}
	for i, o := range ownersOf(p.proc, q.procfs, qps) {
		if i == q.maxSeries {
			p.limits.Add(limitQPOwnerSeries, 1)
			break
		}
		labels := []string{o.Device, o.Port, o.Owner.JobID, o.Owner.PodUID}
		w.Gauge(descRDMAQPOwner, 1, labels...)
		w.Gauge(descRDMAQPOwnerQPs, float64(o.QPs), labels...)
	}
}

package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// plugin publishes who uses each device as info series: pods from the
// kubelet's pod-resources API, Slurm jobs from a job-mapping directory.
type plugin struct {
	now func() time.Time

	// errs outlives a re-Configure, so the counter never goes back.
	errs errorCounts

	mu         sync.Mutex
	resolver   resolver
	pods       *podResources // nil: Kubernetes attribution off
	jobMapping string        // "" : Slurm job mapping off
	sources    []string      // collectors of the configured sources, for attribution_collection_errors_total
}

// errorCounts holds attribution_collection_errors_total.
type errorCounts struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (e *errorCounts) add(collector string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]uint64{}
	}
	e.n[collector]++
}

func (e *errorCounts) count(collector string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[collector]
}

func newPlugin() *plugin { return &plugin{now: time.Now} }

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
	return nil
}

// Collect writes the info series of every enabled source; one source
// failing costs only its own series.
func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	res, pods, jobDir, collectors := p.resolver, p.pods, p.jobMapping, p.sources
	p.mu.Unlock()

	defer func() { p.writeErrors(w, collectors) }()
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
			p.fail(w, collectorJobMapping, err)
		}
		for _, j := range jobs {
			w.Gauge(descDeviceJob, 1, j.Device, j.JobID)
		}
	}
	return nil
}

// writePods writes one kubelet answer, each device ID resolved through
// sysfs at this scrape.
func (p *plugin) writePods(w *sdk.Writer, res resolver, s *podSnapshot) {
	if s.ListErr != nil {
		p.fail(w, collectorPodResources, s.ListErr)
	}
	if s.AllocatableErr != nil {
		p.fail(w, collectorAllocatable, s.AllocatableErr)
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

// fail reports a partial failure of a scrape and counts it.
func (p *plugin) fail(w *sdk.Writer, collector string, err error) {
	p.errs.add(collector)
	w.Error(collector, err)
}

// writeErrors writes attribution_collection_errors_total for the
// collectors of the enabled sources, from the first scrape on.
func (p *plugin) writeErrors(w *sdk.Writer, collectors []string) {
	for _, c := range collectors {
		w.Counter(descCollectionErrors, float64(p.errs.count(c)), c)
	}
}

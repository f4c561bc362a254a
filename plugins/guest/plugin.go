package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"

	"github.com/plexporter/plexporter/sdk"
)

// statfsReserve is the least part of the scrape's remaining time the
// statfs calls leave for writing and sending the samples; they leave a
// tenth of it when that is more, so that a loaded node, where writing and
// sending take longer, does not lose the whole scrape to one hung mount.
const statfsReserve = 100 * time.Millisecond

// plugin exports a VM guest's own view of its health: procfs on every
// scrape, statfs on the mounts bounded by the scrape's deadline, and the
// soft lockups a background tailer of the kernel log has counted.
type plugin struct {
	log        warner
	openKmsg   func(path string) (io.ReadCloser, error)
	readMounts mountsFunc
	// probeTransport is the HTTPS probes' round tripper (nil: the
	// default one); tests trust their server's certificate with it.
	probeTransport http.RoundTripper
	// kernelOnly counts only records the kernel wrote. The test that
	// writes a synthetic report to the real /dev/kmsg turns it off: the
	// kernel stamps whatever userspace writes with a user facility.
	kernelOnly bool

	// errs and statfs outlive a re-Configure: the counter never goes back,
	// and a statfs still blocked from before is still not started twice.
	// errs is guest_collection_errors_total: Collect counts what it
	// reports; the kmsg tailer and the prober count their failures from
	// their goroutines when they happen.
	errs   sdk.CollectionErrors
	statfs *statfsRunner

	mu      sync.Mutex
	cfg     config
	paths   sdk.Paths
	kmsgOn  bool
	tailer  *kmsgTailer // nil when kmsg is off or could not be opened
	openErr error       // why the tailer could not start, until reported
	prober  *prober     // nil when no probe is configured
}

// warner is the part of the SDK's logger the plugin uses (whichever logger
// type sdk.Logger returns).
type warner interface {
	Warn(msg string, args ...any)
}

// failFunc reports a partial failure of a scrape and counts it.
type failFunc func(collector string, err error)

// sources are the kernel trees a scrape reads.
type sources struct {
	procRoot string
	proc     procfs.FS
	block    blockdevice.FS
}

func newPlugin() *plugin {
	return &plugin{
		log:        sdk.Logger(),
		openKmsg:   openKmsg,
		readMounts: readMountinfo,
		kernelOnly: true,
		statfs:     newStatfsRunner(statfs, time.Now),
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "guest",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{
			// CAP_SYSLOG for /dev/kmsg under dmesg_restrict=1 is an
			// operator's grant (README.md), not a need of every node.
			ReadOnlyPaths: []string{
				"/proc/stat", "/proc/pressure", "/proc/meminfo", "/proc/diskstats",
				"/proc/self/mountinfo", "/sys/block", "/etc/ssl/certs", "/etc/pki",
			},
			Devices: []string{defaultKmsgPath},
		},
	}
}

// Configure validates the settings, starts the kernel-log tailer and
// (re)starts the prober. A second Configure keeps a running tailer on the
// same device, so that kernel_soft_lockups_total does not go back to 0.
func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	kmsgOn := c.kmsgEnabled() && cfg.AnyEnabled(descSoftLockups)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg, p.paths, p.kmsgOn = c, cfg.Paths, kmsgOn
	if p.tailer != nil && (!kmsgOn || p.tailer.path != c.KmsgPath) {
		p.tailer.stop()
		p.tailer = nil
	}
	p.openErr = nil
	if p.prober != nil {
		p.prober.stop()
		p.prober = nil
	}
	if c.probesEnabled() && cfg.AnyEnabled(probeDescs...) {
		p.prober = newProber(c.ProbeInterval.Duration, c.ProbeTimeout.Duration, p.probeTargets(c, cfg.Paths),
			p.log, func() { p.errs.Add(collectorProbe, 1) })
		p.prober.start()
	}
	if kmsgOn && p.tailer == nil {
		r, err := p.openKmsg(c.KmsgPath)
		if err != nil {
			// Not a configuration error: the same settings work once the
			// plugin has the privilege (CAP_SYSLOG under dmesg_restrict=1)
			// or the device (a container without /dev/kmsg). A refusal
			// is the operator's choice not to grant kernel-log access
			// (README.md): logged and counted, but not a partial error,
			// as nvme does with its missing privilege.
			p.errs.Add(collectorKmsg, 1)
			if !isPermission(err) {
				p.openErr = fmt.Errorf("open the kernel log: %w; soft lockups are not counted", err)
			}
			p.log.Warn("cannot read the kernel log, so kernel_soft_lockups_total is not exported: reading /dev/kmsg needs CAP_SYSLOG when kernel.dmesg_restrict is 1 (grant it in plugins.guest.manifest; under the systemd unit also ProtectKernelLogs=no)",
				"path", c.KmsgPath, "error", err)
			return nil
		}
		p.tailer = newKmsgTailer(c.KmsgPath, r, p.kernelOnly, p.log, func() { p.errs.Add(collectorKmsg, 1) })
		p.tailer.start()
	}
	return nil
}

// isPermission tells a refused open (no CAP_SYSLOG under dmesg_restrict,
// systemd's ProtectKernelLogs, a sandbox without the device) from others.
func isPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// Close stops the kernel-log tailer and the prober (sdk.Closer). A statfs
// still blocked cannot be stopped; its goroutine ends when the call
// returns.
func (p *plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tailer != nil {
		p.tailer.stop()
		p.tailer = nil
	}
	if p.prober != nil {
		p.prober.stop()
		p.prober = nil
	}
	return nil
}

// probeTargets returns what a probe round probes: the configured ICMP
// targets and HTTPS endpoints, and the NFS servers of the mount table as it
// is at the round (a volume mounted later is probed from then on).
func (p *plugin) probeTargets(c config, paths sdk.Paths) func() ([]probeTarget, error) {
	client := newProbeClient(p.probeTransport)
	return func() ([]probeTarget, error) {
		var out []probeTarget
		for _, h := range c.ICMPTargets {
			out = append(out, probeTarget{probeICMP, h, func(ctx context.Context) error { return pingICMP(ctx, h) }})
		}
		var err error
		if c.NFSProbe {
			var servers []nfsServer
			servers, err = p.nfsServers(paths.Procfs, c.MountinfoPID)
			for _, s := range servers {
				out = append(out, probeTarget{probeNFS, s.addr, func(ctx context.Context) error { return nfsNull(ctx, s.addr, s.version) }})
			}
		}
		for _, u := range c.HTTPSEndpoints {
			out = append(out, probeTarget{probeHTTPS, u, func(ctx context.Context) error { return httpsGet(ctx, client, u) }})
		}
		return out, err
	}
}

// nfsServers lists the NFS servers of the mount table, each once.
func (p *plugin) nfsServers(procRoot string, pid int) ([]nfsServer, error) {
	pfs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	infos, err := p.readMounts(pfs, pid)
	if err != nil {
		return nil, fmt.Errorf("list the NFS servers to probe: %w", err)
	}
	seen := map[nfsServer]bool{}
	var out []nfsServer
	for _, mi := range infos {
		if mi.FSType != "nfs" && mi.FSType != "nfs4" {
			continue
		}
		s, ok := nfsServerOf(mi.Source, mi.SuperOptions)
		if ok && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// Collect reads procfs, runs statfs on the mounts until the deadline and
// writes the soft lockups counted so far.
func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	c, paths, kmsgOn, tailer, openErr, pr := p.cfg, p.paths, p.kmsgOn, p.tailer, p.openErr, p.prober
	p.openErr = nil // reported once, below
	p.mu.Unlock()
	fail := func(collector string, err error) { p.errs.Fail(w, collector, err) }
	defer p.writeErrors(w, kmsgOn, pr != nil)

	src, err := openSources(paths)
	if err != nil {
		fail(collectorStat, err)
		return nil
	}
	if w.AnyEnabled(descCPUSteal, descCPUCount, descProcsRunning, descProcsBlocked) {
		writeStat(w, src.proc, fail)
	}
	writePressure(w, src.proc, src.procRoot, fail)
	if w.AnyEnabled(descMemAvailable, descSwapUsed) {
		writeMeminfo(w, src.proc, fail)
	}
	if w.AnyEnabled(diskDescs...) {
		writeDiskstats(w, src, c.diskRE, fail)
	}
	if w.AnyEnabled(filesystemDescs...) {
		p.collectFilesystems(ctx, w, src, paths.Rootfs, c, fail)
	}

	if openErr != nil {
		w.Error(collectorKmsg, openErr) // counted when it happened
	}
	if tailer != nil {
		if err := tailer.unreported(); err != nil {
			w.Error(collectorKmsg, err) // counted by the tailer
		}
		w.Counter(descSoftLockups, float64(tailer.lockups.Load()))
	}
	if pr != nil {
		results, err := pr.snapshot()
		if err != nil {
			w.Error(collectorProbe, err) // counted by the prober
		}
		for _, r := range results {
			w.Gauge(descProbeSuccess, sdk.Bool(r.success), r.probe, r.target)
			w.Gauge(descProbeDuration, r.duration.Seconds(), r.probe, r.target)
			w.Gauge(descProbeLastRun, sdk.UnixSeconds(r.at), r.probe, r.target)
		}
	}
	return ctx.Err()
}

// collectFilesystems statfs's the selected mounts, never past the scrape's
// deadline (less statfsReserve or a tenth of the time left) nor
// statfs_timeout.
func (p *plugin) collectFilesystems(ctx context.Context, w *sdk.Writer, src sources, rootfs string, c config, fail failFunc) {
	infos, err := p.readMounts(src.proc, c.MountinfoPID)
	if err != nil {
		fail(collectorFilesystem, err)
		return
	}
	mounts := selectMounts(infos, rootfs, c.FilesystemTypes, c.excludeRE)
	deadline := time.Now().Add(c.StatfsTimeout.Duration)
	if d, ok := ctx.Deadline(); ok {
		if last := d.Add(-max(statfsReserve, time.Until(d)/10)); last.Before(deadline) {
			deadline = last
		}
	}
	writeFilesystems(w, mounts, p.statfs.run(mounts, deadline), fail)
}

func openSources(paths sdk.Paths) (sources, error) {
	proc, err := procfs.NewFS(paths.Procfs)
	if err != nil {
		return sources{}, err
	}
	block, err := blockdevice.NewFS(paths.Procfs, paths.Sysfs)
	if err != nil {
		return sources{}, err
	}
	return sources{procRoot: paths.Procfs, proc: proc, block: block}, nil
}

// writeErrors writes guest_collection_errors_total, every collector from
// the first scrape on so that rate() works from zero (kmsg while the tailer
// is configured).
func (p *plugin) writeErrors(w *sdk.Writer, kmsgOn, probesOn bool) {
	p.errs.Write(w, descCollectionErrors, errorCollectors...)
	if kmsgOn {
		p.errs.Write(w, descCollectionErrors, collectorKmsg)
	}
	if probesOn {
		p.errs.Write(w, descCollectionErrors, collectorProbe)
	}
}

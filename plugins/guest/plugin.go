package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// kernelOnly counts only records the kernel wrote. The test that
	// writes a synthetic report to the real /dev/kmsg turns it off: the
	// kernel stamps whatever userspace writes with a user facility.
	kernelOnly bool

	// errs and statfs outlive a re-Configure: the counter never goes back,
	// and a statfs still blocked from before is still not started twice.
	// errs is guest_collection_errors_total: Collect counts what it
	// reports; the kmsg tailer counts its failures from its goroutine when
	// they happen.
	errs   sdk.CollectionErrors
	statfs *statfsRunner

	mu      sync.Mutex
	cfg     config
	paths   sdk.Paths
	kmsgOn  bool
	tailer  *kmsgTailer // nil when kmsg is off or could not be opened
	openErr error       // why the tailer could not start, until reported
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
				"/proc/self/mountinfo", "/sys/block",
			},
			Devices: []string{defaultKmsgPath},
		},
	}
}

// Configure validates the settings and starts the kernel-log tailer. A
// second Configure keeps a running tailer on the same device, so that
// kernel_soft_lockups_total does not go back to 0.
func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	movedKeys(cfg)
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

// Close stops the kernel-log tailer (sdk.Closer). A statfs
// still blocked cannot be stopped; its goroutine ends when the call
// returns.
func (p *plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tailer != nil {
		p.tailer.stop()
		p.tailer = nil
	}
	return nil
}

// Collect reads procfs, runs statfs on the mounts until the deadline and
// writes the soft lockups counted so far.
func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	c, paths, kmsgOn, tailer, openErr := p.cfg, p.paths, p.kmsgOn, p.tailer, p.openErr
	p.openErr = nil // reported once, below
	p.mu.Unlock()
	fail := func(collector string, err error) { p.errs.Fail(w, collector, err) }
	defer p.writeErrors(w, kmsgOn)

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
// is configured). The probe plugin writes collector="probe" of the same
// family.
func (p *plugin) writeErrors(w *sdk.Writer, kmsgOn bool) {
	p.errs.Write(w, descCollectionErrors, errorCollectors...)
	if kmsgOn {
		p.errs.Write(w, descCollectionErrors, collectorKmsg)
	}
}

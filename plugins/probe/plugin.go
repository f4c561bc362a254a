package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk"
)

// plugin probes the configured targets and the mount table's NFS servers
// from a background prober; scrapes serve the latest round's results.
type plugin struct {
	log        warner
	readMounts mountsFunc
	// probeTransport is the HTTPS probes' round tripper (nil: the
	// default one); tests trust their server's certificate with it.
	probeTransport http.RoundTripper
	// run makes one probe of each kind; the demo build answers from a
	// table instead of the network.
	run probeFuncs

	// errs outlives a re-Configure: the counter never goes back. It is
	// guest_collection_errors_total{collector="probe"}: the prober counts
	// its failures from its goroutine when they happen.
	errs sdk.CollectionErrors

	mu     sync.Mutex
	cfg    config
	prober *prober // nil when no probe is configured
}

// warner is the part of the SDK's logger the plugin uses (whichever logger
// type sdk.Logger returns).
type warner interface {
	Warn(msg string, args ...any)
}

// mountsFunc reads the mount table of process pid: <procfs>/<pid>/mountinfo,
// <procfs>/self/mountinfo for pid 0.
type mountsFunc func(pfs procfs.FS, pid int) ([]*procfs.MountInfo, error)

func readMountinfo(pfs procfs.FS, pid int) ([]*procfs.MountInfo, error) {
	if pid > 0 {
		return pfs.GetProcMounts(pid)
	}
	return pfs.GetMounts()
}

// probeFuncs are the three probes.
type probeFuncs struct {
	icmp  func(ctx context.Context, host string) error
	nfs   func(ctx context.Context, addr string, version uint32) error
	https func(ctx context.Context, client *http.Client, url string) error
}

func newPlugin() *plugin {
	return &plugin{
		log:        sdk.Logger(),
		readMounts: readMountinfo,
		run:        probeFuncs{icmp: pingICMP, nfs: nfsNull, https: httpsGet},
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "probe",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{
			// The mount table for the NFS servers; the system's CA
			// certificates for the HTTPS probes. The network is the
			// operator's grant (README.md, The sandbox).
			ReadOnlyPaths: []string{"/proc/self/mountinfo", "/etc/ssl/certs", "/etc/pki"},
		},
	}
}

// Configure validates the settings and (re)starts the prober.
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
	p.cfg = c
	if p.prober != nil {
		p.prober.stop()
		p.prober = nil
	}
	if c.probesEnabled() && cfg.AnyEnabled(probeDescs...) {
		p.prober = newProber(c.ProbeInterval.Duration, c.ProbeTimeout.Duration, p.probeTargets(c, cfg.Paths),
			p.log, func() { p.errs.Add(collectorProbe, 1) })
		p.prober.start()
	}
	return nil
}

// Close stops the prober (sdk.Closer).
func (p *plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
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
	run := p.run
	return func() ([]probeTarget, error) {
		var out []probeTarget
		for _, h := range c.ICMPTargets {
			out = append(out, probeTarget{probeICMP, h, func(ctx context.Context) error { return run.icmp(ctx, h) }})
		}
		var err error
		if c.NFSProbe {
			var servers []nfsServer
			servers, err = p.nfsServers(paths.Procfs, c.MountinfoPID)
			for _, s := range servers {
				out = append(out, probeTarget{probeNFS, s.addr, func(ctx context.Context) error { return run.nfs(ctx, s.addr, s.version) }})
			}
		}
		for _, u := range c.HTTPSEndpoints {
			out = append(out, probeTarget{probeHTTPS, u, func(ctx context.Context) error { return run.https(ctx, client, u) }})
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

// Collect writes the latest round's results and reports the prober's
// latest failure once.
func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	pr := p.prober
	p.mu.Unlock()
	if pr == nil {
		return ctx.Err()
	}
	// guest_collection_errors_total{collector="probe"} from the first
	// scrape on while a probe is configured, so that rate() works from
	// zero.
	defer p.errs.Write(w, descCollectionErrors, collectorProbe)
	results, err := pr.snapshot()
	if err != nil {
		w.Error(collectorProbe, err) // counted by the prober
	}
	for _, r := range results {
		w.Gauge(descProbeSuccess, sdk.Bool(r.success), r.probe, r.target)
		w.Gauge(descProbeDuration, r.duration.Seconds(), r.probe, r.target)
		w.Gauge(descProbeLastRun, sdk.UnixSeconds(r.at), r.probe, r.target)
	}
	return ctx.Err()
}

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/plexporter/plexporter/sdk"
)

type plugin struct {
	src statsSource // driver statistics (ioctl); a fixture source in tests
	std stdSource   // standard statistics (ethtool netlink); a fake kernel in tests

	mu         sync.Mutex // one Collect at a time; guards the fields below
	configured bool
	cfg        config
	paths      sdk.Paths
	devices    *sdk.Devices // the host's device filter: a rejected device is not touched

	// Cumulative error and cap counters (process lifetime, like the seed's).
	pfcErrors, netdevErrors float64
	collectionErrors        sdk.CollectionErrors // ethtool_collection_errors_total
	capped                  map[string]float64   // by netdev
	splits                  queueSplits          // driver statistic names split at their queue
}

func newPlugin() *plugin {
	return &plugin{
		src:    newIoctlSource(),
		std:    newGenlSource(),
		capped: map[string]float64{},
		splits: queueSplits{},
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "ethtool",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{"/sys/class/infiniband", "/sys/class/net", "/sys/devices", "/sys/bus/pci/devices"}},
	}
}

// Configure applies a new section as a whole, or keeps the running settings
// when it is refused.
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
	p.cfg, p.paths, p.devices, p.configured = c, cfg.Paths, cfg.Devices, true
	return nil
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.configured {
		return errors.New("not configured")
	}
	stats := &scrapeStats{src: p.src, cache: map[string]fetched{}}
	// The netdevs of devices the host's device filter rejects are not
	// queried by any family (README "Device filter").
	skip := rejectedNetdevs(p.paths.Sysfs, p.devices)
	if p.cfg.rdma() {
		p.collectRDMA(ctx, w, stats, skip)
	}
	drv := p.cfg.DriverStats && w.AnyEnabled(driverDescs...)
	var std stdRequest
	if p.cfg.standardStats() {
		std = stdRequestFor(w)
	}
	if drv || !std.none() {
		netdevs, err := listNetdevs(p.paths.Sysfs, &p.cfg, skip)
		if err != nil {
			p.collectionErrors.Fail(w, collectorNetdevs, fmt.Errorf("list netdevs: %w", err))
		} else {
			if drv {
				p.collectDriverStats(ctx, w, stats, netdevs)
			}
			if !std.none() {
				p.collectStandard(ctx, w, std, netdevs)
			}
		}
	}
	// A collector's series exists while its source is switched on, from the
	// first scrape on (at 0); driver_stats reads serve the rdma families too.
	for _, c := range []struct {
		name string
		on   bool
	}{
		{collectorRDMASysfs, p.cfg.rdma()},
		{collectorNetdevs, p.cfg.DriverStats || p.cfg.standardStats()},
		{collectorRDMAStats, p.cfg.rdma()},
		{collectorDriverStats, p.cfg.DriverStats},
		{collectorStandardStats, p.cfg.standardStats()},
	} {
		if c.on {
			p.collectionErrors.Write(w, descCollectionErrors, c.name)
		}
	}
	return ctx.Err()
}

// scrapeStats reads each netdev's driver statistics at most once per collect.
type scrapeStats struct {
	src   statsSource
	cache map[string]fetched
}

type fetched struct {
	st  *driverStats
	err error
}

// get returns nil, nil when the netdev has no driver statistics.
func (s *scrapeStats) get(ctx context.Context, netdev string) (*driverStats, error) {
	if f, ok := s.cache[netdev]; ok {
		return f.st, f.err
	}
	st, err := s.src.DriverStats(ctx, netdev)
	if errors.Is(err, errNoStats) {
		st, err = nil, nil
	}
	s.cache[netdev] = fetched{st, err}
	return st, err
}

// collectRDMA writes the rdma_exporter-compatible families. Scoping rules
// (README "Scoping"): only Ethernet ports with a netdev; ports of PCI VFs
// are skipped; PFC per (device, port); the other families once per netdev;
// vPort families only when attributable to exactly this function.
func (p *plugin) collectRDMA(ctx context.Context, w *sdk.Writer, stats *scrapeStats, skip map[string]bool) {
	pfcOn, hwOn := w.AnyEnabled(pfcDescs...), w.AnyEnabled(hwDescs...)
	ionicOn := w.AnyEnabled(ionicDescs...) // the ionic_* families read the same tables (ionic.go)
	// rdma_exporter's ethtool sub-collector succeeded when every read
	// behind these families did.
	ok := true
	fail := func(collector string, err error) {
		ok = false
		p.collectionErrors.Fail(w, collector, err)
	}
	if pfcOn || hwOn || ionicOn {
		ports, devErrs, err := discoverRDMAPorts(p.paths.Sysfs, p.devices, skip)
		if err != nil {
			fail(collectorRDMASysfs, fmt.Errorf("list RDMA devices: %w", err))
		}
		for _, err := range devErrs {
			fail(collectorRDMASysfs, err)
		}
		owners := ethernetOwners(ports)
		hwDone := map[string]bool{}
		ionic := newIonicWriter(w) // ionic.go
		for _, port := range ports {
			if ctx.Err() != nil {
				break
			}
			if port.IsVF || port.LinkLayer != "Ethernet" || port.NetDev == "" {
				continue
			}
			st, err := stats.get(ctx, port.NetDev)
			if err != nil {
				if _, seen := hwDone["err:"+port.NetDev]; !seen {
					hwDone["err:"+port.NetDev] = true
					if pfcOn {
						p.pfcErrors++
					}
					if hwOn {
						p.netdevErrors++
					}
				}
				fail(collectorRDMAStats, fmt.Errorf("%s port %s: %w", port.Device, port.Port, err))
				continue
			}
			if st == nil {
				continue
			}
			ionic.write(port.NetDev, st)
			vals, names := firstValues(st)
			if pfcOn {
				emitPFC(w, port, vals, names)
			}
			if hwOn && !hwDone[port.NetDev] {
				hwDone[port.NetDev] = true
				emitHW(w, port, vals, names, skipVPort(p.paths.Sysfs, port, owners))
			}
		}
	}
	w.Counter(descPFCErrors, p.pfcErrors)
	w.Counter(descNetdevErrors, p.netdevErrors)
	if ok && ctx.Err() == nil {
		w.Gauge(descCollectorSuccess, 1, "ethtool")
	} else {
		w.Gauge(descCollectorSuccess, 0, "ethtool")
	}
}

// collectDriverStats writes every driver statistic of the selected netdevs.
func (p *plugin) collectDriverStats(ctx context.Context, w *sdk.Writer, stats *scrapeStats, netdevs []string) {
	for _, n := range netdevs {
		if ctx.Err() != nil {
			return
		}
		st, err := stats.get(ctx, n)
		if err != nil {
			p.collectionErrors.Fail(w, collectorDriverStats, err)
			continue
		}
		if st == nil {
			continue
		}
		dropped := emitDriverStats(w, &p.cfg, p.splits, n, st)
		if dropped > 0 {
			p.capped[n]++
		}
		w.Gauge(descDriverDropped, float64(dropped), n)
		w.Counter(descDriverCapped, p.capped[n], n)
	}
}

// collectStandard writes the kernel's standard statistics of the selected
// netdevs. Parts a driver does not support (EOPNOTSUPP) and counters it
// leaves unset have no series; only a failed read is an error.
func (p *plugin) collectStandard(ctx context.Context, w *sdk.Writer, req stdRequest, netdevs []string) {
	for _, n := range netdevs {
		if ctx.Err() != nil {
			return
		}
		st, err := p.std.StandardStats(ctx, n, req)
		if errors.Is(err, errNoStats) {
			return // no ethtool netlink family in this kernel
		}
		if err != nil {
			p.collectionErrors.Fail(w, collectorStandardStats, err)
			continue
		}
		emitStandard(w, n, st)
	}
}

// Command plexporter-ethtool exports NIC hardware counters read through the
// SIOCETHTOOL ioctl: rdma_exporter-compatible families for the netdevs of
// RDMA Ethernet ports, and (opt-in) every driver statistic of selected NICs;
// plus the kernel's standard statistics (IEEE 802.3 / RMON groups, pause and
// FEC counters) of selected NICs through ethtool netlink.
package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/plexporter/plexporter/sdk"
)

const version = "0.1.0"

func main() { sdk.Serve(newPlugin()) }

// config is the plugin's section of the host configuration.
type config struct {
	// RDMA enables the rdma_* families for netdevs of RDMA Ethernet ports.
	RDMA *bool `json:"rdma"`
	// Include / Exclude select netdevs for the ethtool_* families (Go regexps
	// matched against the whole name when anchored; empty = no filter).
	Include string `json:"include"`
	Exclude string `json:"exclude"`
	// RequireDevice keeps only netdevs with a class/net/<if>/device link.
	RequireDevice *bool `json:"require_device"`
	// StandardStats reads the kernel's standard statistics through ethtool
	// netlink (default on).
	StandardStats *bool `json:"standard_stats"`
	// DriverStats exports every driver statistic (cardinality hazard: off).
	DriverStats             bool   `json:"driver_stats"`
	DriverStatInclude       string `json:"driver_stat_include"`
	DriverStatExclude       string `json:"driver_stat_exclude"`
	MaxDriverStatsPerNetdev int    `json:"max_driver_stats_per_netdev"`
}

type plugin struct {
	mu    sync.Mutex
	cfg   config
	paths sdk.Paths
	src   statsSource
	std   stdSource

	include, exclude         *regexp.Regexp
	statInclude, statExclude *regexp.Regexp

	// Cumulative error and cap counters (process lifetime, like the seed's).
	pfcErrors, netdevErrors float64
	scrapeErrors            map[string]float64
	capped                  map[string]float64
}

func newPlugin() *plugin {
	return &plugin{src: newIoctlSource(), std: newGenlSource(), scrapeErrors: map[string]float64{}, capped: map[string]float64{}}
}

func (p *plugin) Info() sdk.Info {
	metrics := append([]*sdk.Desc{}, pfcDescs...)
	metrics = append(metrics, descPFCErrors)
	metrics = append(metrics, hwDescs...)
	metrics = append(metrics, descNetdevErrors)
	metrics = append(metrics, driverDescs...)
	metrics = append(metrics, stdDescs()...)
	metrics = append(metrics, descScrapeErrors)
	return sdk.Info{
		Name:    "ethtool",
		Version: version,
		Metrics: metrics,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{"/sys/class/infiniband", "/sys/class/net", "/sys/devices", "/sys/bus/pci/devices"}},
	}
}

func (p *plugin) Configure(_ context.Context, c sdk.Config) error {
	cfg := config{MaxDriverStatsPerNetdev: 1000}
	if err := c.Decode(&cfg); err != nil {
		return err
	}
	t := true
	if cfg.RDMA == nil {
		cfg.RDMA = &t
	}
	if cfg.RequireDevice == nil {
		cfg.RequireDevice = &t
	}
	if cfg.StandardStats == nil {
		cfg.StandardStats = &t
	}
	if cfg.MaxDriverStatsPerNetdev <= 0 {
		return fmt.Errorf("ethtool: max_driver_stats_per_netdev must be positive, got %d", cfg.MaxDriverStatsPerNetdev)
	}
	var err error
	for _, r := range []struct {
		key, expr string
		dst       **regexp.Regexp
	}{
		{"include", cfg.Include, &p.include},
		{"exclude", cfg.Exclude, &p.exclude},
		{"driver_stat_include", cfg.DriverStatInclude, &p.statInclude},
		{"driver_stat_exclude", cfg.DriverStatExclude, &p.statExclude},
	} {
		*r.dst = nil
		if r.expr == "" {
			continue
		}
		if *r.dst, err = regexp.Compile(r.expr); err != nil {
			return fmt.Errorf("ethtool: %s: %w", r.key, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	p.paths = c.Paths
	return nil
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

func anyEnabled(w *sdk.Writer, ds []*sdk.Desc) bool {
	for _, d := range ds {
		if w.Enabled(d) {
			return true
		}
	}
	return false
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	stats := &scrapeStats{src: p.src, cache: map[string]fetched{}}
	if *p.cfg.RDMA {
		p.collectRDMA(ctx, w, stats)
	}
	drv := p.cfg.DriverStats && anyEnabled(w, driverDescs)
	var std stdRequest
	if *p.cfg.StandardStats {
		std = stdRequestFor(w)
	}
	if drv || !std.none() {
		netdevs, err := p.listNetdevs()
		if err != nil {
			p.scrapeErrors["netdevs"]++
			w.Error("netdevs", fmt.Errorf("list netdevs: %w", err))
		} else {
			if drv {
				p.collectDriverStats(ctx, w, stats, netdevs)
			}
			if !std.none() {
				p.collectStandard(ctx, w, std, netdevs)
			}
		}
	}
	// Error counters of the ethtool_* sources that are switched on.
	if p.cfg.DriverStats || *p.cfg.StandardStats {
		w.Counter(descScrapeErrors, p.scrapeErrors["netdevs"], "netdevs")
	}
	if p.cfg.DriverStats {
		w.Counter(descScrapeErrors, p.scrapeErrors["driver_stats"], "driver_stats")
	}
	if *p.cfg.StandardStats {
		w.Counter(descScrapeErrors, p.scrapeErrors["standard_stats"], "standard_stats")
	}
	return ctx.Err()
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
			p.scrapeErrors["standard_stats"]++
			w.Error("standard_stats", err)
			continue
		}
		emitStandard(w, n, st)
	}
}

// collectRDMA writes the rdma_exporter-compatible families. Scoping rules
// (README "Scoping"): only Ethernet ports with a netdev; ports of PCI VFs
// are skipped; PFC per (device, port); the other families once per netdev;
// vPort families only when attributable to exactly this function.
func (p *plugin) collectRDMA(ctx context.Context, w *sdk.Writer, stats *scrapeStats) {
	pfcOn, hwOn := anyEnabled(w, pfcDescs), anyEnabled(w, hwDescs)
	if pfcOn || hwOn {
		ports, err := discoverRDMAPorts(p.paths.Sysfs)
		if err != nil {
			w.Error("rdma_sysfs", fmt.Errorf("list RDMA devices under %s: %w", p.paths.Sysfs, err))
		}
		owners := ethernetOwners(ports)
		hwDone := map[string]bool{}
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
				w.Error("driver_stats", fmt.Errorf("%s port %s: %w", port.Device, port.Port, err))
				continue
			}
			if st == nil {
				continue
			}
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
}

// collectDriverStats writes every driver statistic of the selected netdevs.
func (p *plugin) collectDriverStats(ctx context.Context, w *sdk.Writer, stats *scrapeStats, netdevs []string) {
	for _, n := range netdevs {
		if ctx.Err() != nil {
			return
		}
		st, err := stats.get(ctx, n)
		if err != nil {
			p.scrapeErrors["driver_stats"]++
			w.Error("driver_stats", err)
			continue
		}
		if st == nil {
			continue
		}
		dropped := p.emitDriverStats(w, n, st)
		if dropped > 0 {
			p.capped[n]++
		}
		w.Gauge(descDriverDropped, float64(dropped), n)
		w.Counter(descDriverCapped, p.capped[n], n)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/plexporter/plexporter/sdk"
)

type plugin struct {
	// dial opens an RDMA netlink connection; replaced in tests.
	dial func() (nlConn, error)

	mu          sync.Mutex // one Collect at a time; guards the fields below
	sysfs       *sysfsReader
	optional    bool
	qp          bool
	descs       *counterDescs
	scrapeErrs  uint64
	optionalErr uint64
	qpErrs      uint64
}

func newPlugin() *plugin {
	return &plugin{
		dial: func() (nlConn, error) {
			c, err := netlink.Dial(familyRDMA, nil)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		descs: newCounterDescs(),
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "rdma",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{"/sys/class/infiniband", "/sys/devices", "/sys/bus/pci/devices"}},
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
	p.sysfs = newSysfsReader(cfg.Paths.Sysfs, c.ExcludeDevices)
	p.optional = c.optionalCounters()
	p.qp = c.QPCounters
	return nil
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sysfs == nil {
		return errors.New("not configured")
	}

	devs, err := p.sysfs.devices(ctx)
	sysfsOK := 1.0
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.scrapeErrs++
		sysfsOK = 0
		w.Error("sysfs", err)
	}
	hwNames := map[string]map[int]map[string]bool{} // device -> port -> hw_counters names
	for _, d := range devs {
		p.writeDevice(w, d)
		hwNames[d.name] = map[int]map[string]bool{}
		for _, port := range d.ports {
			hwNames[d.name][port.num] = port.hwNames
		}
	}
	w.Gauge(descCollectorSuccess, sysfsOK, "sysfs")

	switch {
	case !(p.optional && p.optionalWanted(w)) && !(p.qp && p.qpWanted(w)):
	case len(devs) == 0 && err == nil:
		// No RDMA device: nothing to ask netlink about. Hosts without the
		// RDMA subsystem refuse NETLINK_RDMA sockets, which is not an error.
		if p.optional {
			w.Gauge(descCollectorSuccess, 1, "optional-counters")
		}
		if p.qp {
			w.Gauge(descCollectorSuccess, 1, "qp-counters")
		}
	default:
		p.collectNetlink(ctx, w, devs, hwNames)
	}

	w.Counter(descScrapeErrors, float64(p.scrapeErrs))
	if p.optional {
		w.Counter(descOptionalErrors, float64(p.optionalErr))
	}
	if p.qp {
		w.Counter(descQPErrors, float64(p.qpErrs))
	}
	return nil
}

func (p *plugin) writeDevice(w *sdk.Writer, d deviceData) {
	for _, err := range d.errs {
		p.scrapeErrs++
		w.Error("sysfs", err)
	}
	for _, port := range d.ports {
		pl := strconv.Itoa(port.num)
		for _, c := range port.counters {
			w.Counter(p.descs.get(c.name), float64(c.value), d.name, pl)
		}
		if port.hasLifespan {
			w.Gauge(descLifespan, float64(port.lifespan), d.name, pl)
		}
		w.Gauge(descPortInfo, 1, d.name, pl, port.netdev, port.linkLayer, port.state, port.physState,
			port.linkWidth, port.linkRate, d.pciAddr, strconv.FormatBool(d.isVF), d.pfDevice)
	}
}

func (p *plugin) optionalWanted(w *sdk.Writer) bool {
	if w.Enabled(descOptionalEnabled) || w.Enabled(descOptionalErrors) || w.Enabled(descCollectorSuccess) {
		return true
	}
	for _, d := range optionalDescs {
		if w.Enabled(d) {
			return true
		}
	}
	return false
}

func (p *plugin) qpWanted(w *sdk.Writer) bool {
	if w.Enabled(descQPMode) || w.Enabled(descQPAutoMask) || w.Enabled(descQPScrapeStatus) ||
		w.Enabled(descQPErrors) || w.Enabled(descCollectorSuccess) {
		return true
	}
	for _, d := range qpDescs {
		if w.Enabled(d) {
			return true
		}
	}
	return false
}

// collectNetlink runs the optional-counter and QP sub-collectors over one
// RDMA netlink connection, for the devices sysfs reported (so
// exclude_devices applies to both).
func (p *plugin) collectNetlink(ctx context.Context, w *sdk.Writer, devs []deviceData, hwNames map[string]map[int]map[string]bool) {
	fail := func(err error) {
		if p.optional {
			p.optionalErr++
			w.Error("optional-counters", err)
			w.Gauge(descCollectorSuccess, 0, "optional-counters")
		}
		if p.qp {
			p.qpErrs++
			w.Error("qp-counters", err)
			w.Gauge(descCollectorSuccess, 0, "qp-counters")
		}
	}
	conn, err := p.dial()
	if err != nil {
		fail(fmt.Errorf("open RDMA netlink socket: %w", err))
		return
	}
	defer conn.Close()
	if d, ok := conn.(interface{ SetDeadline(t time.Time) error }); ok {
		if dl, ok := ctx.Deadline(); ok {
			_ = d.SetDeadline(dl)
		}
	}
	client := &nldevClient{conn: conn}
	nlDevs, err := client.devices(ctx)
	if err != nil {
		fail(err)
		return
	}
	byName := map[string]nlDevice{}
	for _, d := range nlDevs {
		byName[d.name] = d
	}

	if p.optional {
		p.collectOptional(ctx, w, client, devs, byName, hwNames)
		w.Gauge(descCollectorSuccess, 1, "optional-counters")
	}
	if p.qp {
		p.collectQP(ctx, w, client, devs, byName)
		w.Gauge(descCollectorSuccess, 1, "qp-counters")
	}
}

func (p *plugin) collectOptional(ctx context.Context, w *sdk.Writer, c *nldevClient, devs []deviceData, byName map[string]nlDevice, hwNames map[string]map[int]map[string]bool) {
	for _, d := range devs {
		nd, ok := byName[d.name]
		if !ok {
			continue // not visible in this network namespace
		}
		for _, port := range d.ports {
			if ctx.Err() != nil {
				return
			}
			pl := strconv.Itoa(port.num)
			status, err := c.statStatus(ctx, nd.index, uint32(port.num))
			if err != nil {
				p.optionalErr++
				w.Error("optional-counters", fmt.Errorf("%s/%d: counter status: %w", d.name, port.num, err))
				continue
			}
			var enabled []string
			for _, s := range status {
				if !s.dynamic {
					continue
				}
				v := 0.0
				if s.enabled {
					v = 1
					enabled = append(enabled, s.name)
				}
				w.Gauge(descOptionalEnabled, v, d.name, pl, s.name)
			}
			if len(enabled) == 0 {
				continue
			}
			values, err := c.statValues(ctx, nd.index, uint32(port.num))
			if err != nil {
				p.optionalErr++
				w.Error("optional-counters", fmt.Errorf("%s/%d: counter values: %w", d.name, port.num, err))
				continue
			}
			got := map[string]uint64{}
			for _, v := range values {
				if v.hasValue {
					got[v.name] = v.value
				}
			}
			for _, name := range enabled {
				v, ok := got[name]
				if !ok {
					p.optionalErr++
					w.Error("optional-counters", fmt.Errorf("%s/%d: enabled optional counter %s has no value", d.name, port.num, name))
					continue
				}
				desc, mapped := optionalDescs[name]
				if !mapped || hwNames[d.name][port.num][name] {
					continue // unmapped names only show on rdma_optional_counter_enabled
				}
				w.Counter(desc, float64(v), d.name, pl)
			}
		}
	}
}

func (p *plugin) collectQP(ctx context.Context, w *sdk.Writer, c *nldevClient, devs []deviceData, byName map[string]nlDevice) {
	for _, d := range devs {
		nd, ok := byName[d.name]
		if !ok {
			continue
		}
		for _, port := range d.ports {
			if ctx.Err() != nil {
				return
			}
			pl := strconv.Itoa(port.num)
			mode, err := c.qpMode(ctx, nd.index, uint32(port.num))
			if err != nil {
				p.qpErrs++
				w.Error("qp-counters", fmt.Errorf("%s/%d: QP counter mode: %w", d.name, port.num, err))
				p.qpStatus(w, d.name, pl, "error")
				continue
			}
			for _, m := range []string{"none", "auto", "manual"} {
				w.Gauge(descQPMode, b2f(mode.name() == m), d.name, pl, m)
			}
			w.Gauge(descQPAutoMask, b2f(mode.maskType), d.name, pl, "type")
			w.Gauge(descQPAutoMask, b2f(mode.maskPID), d.name, pl, "pid")
			if mode.mode != counterModeAuto || !mode.maskType || mode.maskPID {
				continue // only "auto type-only" is dumped
			}
			sets, err := c.qpSets(ctx, nd.index, uint32(port.num))
			if err != nil {
				p.qpErrs++
				w.Error("qp-counters", fmt.Errorf("%s/%d: QP counter dump: %w", d.name, port.num, err))
				if errors.Is(err, errDumpOverflow) {
					p.qpStatus(w, d.name, pl, "overflow")
				} else {
					p.qpStatus(w, d.name, pl, "error")
				}
				continue
			}
			p.qpStatus(w, d.name, pl, "ok")
			totals := map[string]map[string]uint64{}
			var types []string
			for _, s := range sets {
				if !s.autoType() {
					continue
				}
				if totals[s.qpType] == nil {
					totals[s.qpType] = map[string]uint64{}
					types = append(types, s.qpType)
				}
				for _, n := range qpValueNames {
					if v, ok := s.stats[n]; ok {
						totals[s.qpType][n] += v
					}
				}
			}
			for _, t := range types {
				for _, n := range qpValueNames {
					if v, ok := totals[t][n]; ok {
						w.Counter(qpDescs[n], float64(v), d.name, pl, t)
					}
				}
			}
		}
	}
}

func (p *plugin) qpStatus(w *sdk.Writer, dev, port, result string) {
	for _, r := range []string{"ok", "overflow", "error"} {
		w.Gauge(descQPScrapeStatus, b2f(r == result), dev, port, r)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

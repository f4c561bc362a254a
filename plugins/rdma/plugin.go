package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
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
	if p.sysfs != nil {
		p.sysfs.close() // the descriptors it holds
	}
	p.sysfs = newSysfsReader(cfg.Paths.Sysfs, c.ExcludeDevices)
	p.sysfs.allow = cfg.Devices // a device the host filters out is not touched either
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
	for _, d := range devs {
		p.writeDevice(w, d)
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
		p.collectNetlink(ctx, w, devs)
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
	w.Gauge(descDeviceInfo, 1, d.name, d.ident.boardID, d.ident.fwVer, d.ident.hcaType, d.ident.nodeGUID)
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
	if w.AnyEnabled(descOptionalEnabled, descOptionalErrors, descCollectorSuccess) {
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
	if w.AnyEnabled(descQPMode, descQPAutoMask, descQPScrapeStatus, descQPErrors, descCollectorSuccess) {
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
func (p *plugin) collectNetlink(ctx context.Context, w *sdk.Writer, devs []deviceData) {
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
	ports := netlinkPorts(ctx, devs, nlDevs)

	if p.optional {
		p.collectOptional(ctx, w, client, ports)
		w.Gauge(descCollectorSuccess, 1, "optional-counters")
	}
	if p.qp {
		p.collectQP(ctx, w, client, ports)
		w.Gauge(descCollectorSuccess, 1, "qp-counters")
	}
}

// nlPort is a port sysfs listed on a device RDMA netlink also reports.
type nlPort struct {
	device  string // the device label
	index   uint32 // the device's netlink index
	num     uint32 // the port number
	label   string // num, as the port label
	hwNames names  // sysfs's hw_counters/ names (sysfs wins over netlink)
}

// netlinkPorts yields the ports of devs, in their order, whose device
// netlink reports (a device of another network namespace is skipped), and
// stops when ctx ends.
func netlinkPorts(ctx context.Context, devs []deviceData, nlDevs []nlDevice) iter.Seq[nlPort] {
	byName := map[string]nlDevice{}
	for _, d := range nlDevs {
		byName[d.name] = d
	}
	return func(yield func(nlPort) bool) {
		for _, d := range devs {
			nd, ok := byName[d.name]
			if !ok {
				continue // not visible in this network namespace
			}
			for _, port := range d.ports {
				if ctx.Err() != nil {
					return
				}
				if !yield(nlPort{device: d.name, index: nd.index, num: uint32(port.num), label: strconv.Itoa(port.num), hwNames: port.hwNames}) {
					return
				}
			}
		}
	}
}

func (p *plugin) collectOptional(ctx context.Context, w *sdk.Writer, c *nldevClient, ports iter.Seq[nlPort]) {
	for pt := range ports {
		status, err := c.statStatus(ctx, pt.index, pt.num)
		if err != nil {
			failPort(w, &p.optionalErr, "optional-counters", pt, fmt.Errorf("counter status: %w", err))
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
			w.Gauge(descOptionalEnabled, v, pt.device, pt.label, s.name)
		}
		if len(enabled) == 0 {
			continue
		}
		values, err := c.statValues(ctx, pt.index, pt.num)
		if err != nil {
			failPort(w, &p.optionalErr, "optional-counters", pt, fmt.Errorf("counter values: %w", err))
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
				failPort(w, &p.optionalErr, "optional-counters", pt, fmt.Errorf("enabled optional counter %s has no value", name))
				continue
			}
			desc, mapped := optionalDescs[name]
			if !mapped || pt.hwNames.has(name) {
				continue // unmapped names only show on rdma_optional_counter_enabled
			}
			w.Counter(desc, float64(v), pt.device, pt.label)
		}
	}
}

func (p *plugin) collectQP(ctx context.Context, w *sdk.Writer, c *nldevClient, ports iter.Seq[nlPort]) {
	for pt := range ports {
		mode, err := c.qpMode(ctx, pt.index, pt.num)
		if err != nil {
			failPort(w, &p.qpErrs, "qp-counters", pt, fmt.Errorf("QP counter mode: %w", err))
			p.qpStatus(w, pt.device, pt.label, "error")
			continue
		}
		for _, m := range []string{"none", "auto", "manual"} {
			w.Gauge(descQPMode, sdk.Bool(mode.name() == m), pt.device, pt.label, m)
		}
		w.Gauge(descQPAutoMask, sdk.Bool(mode.maskType), pt.device, pt.label, "type")
		w.Gauge(descQPAutoMask, sdk.Bool(mode.maskPID), pt.device, pt.label, "pid")
		if mode.mode != counterModeAuto || !mode.maskType || mode.maskPID {
			continue // only "auto type-only" is dumped
		}
		sets, err := c.qpSets(ctx, pt.index, pt.num)
		if err != nil {
			failPort(w, &p.qpErrs, "qp-counters", pt, fmt.Errorf("QP counter dump: %w", err))
			if errors.Is(err, errDumpOverflow) {
				p.qpStatus(w, pt.device, pt.label, "overflow")
			} else {
				p.qpStatus(w, pt.device, pt.label, "error")
			}
			continue
		}
		p.qpStatus(w, pt.device, pt.label, "ok")
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
					w.Counter(qpDescs[n], float64(v), pt.device, pt.label, t)
				}
			}
		}
	}
}

// failPort counts a failed request about one port in its collector's error
// counter and reports it to the host, so the two counts agree.
func failPort(w *sdk.Writer, counter *uint64, collector string, pt nlPort, err error) {
	*counter++
	w.Error(collector, fmt.Errorf("%s/%d: %w", pt.device, pt.num, err))
}

func (p *plugin) qpStatus(w *sdk.Writer, dev, port, result string) {
	for _, r := range []string{"ok", "overflow", "error"} {
		w.Gauge(descQPScrapeStatus, sdk.Bool(r == result), dev, port, r)
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// plugin exports NVMe controller identity (sysfs, every scrape) and the
// SMART/Health log (admin ioctl, polled in the background).
type plugin struct {
	open        openFunc
	now         func() time.Time
	log         *slog.Logger
	minInterval time.Duration

	// errs (nvme_collection_errors_total) outlives a re-Configure, so the
	// counter never goes back. Collect counts the controllers and identity
	// failures it reports; the poller counts every failed SMART read from
	// its own goroutines, including those that are not reported (missing
	// privilege).
	errs sdk.CollectionErrors

	mu       sync.Mutex
	sysfs    string
	poller   *poller // nil when SMART is off
	smartOff bool
	// omitted are the families the metric_prefix would give a Crusoe
	// exporter's name of another meaning (crusoeConflicts): not written.
	omitted map[*sdk.Desc]bool

	// confineErr is why the shipped binary could not install its seccomp
	// filter (confine.go); Configure refuses to run then.
	confineErr error
}

func newPlugin() *plugin {
	return &plugin{
		open:        openIoctlDevice,
		now:         time.Now,
		log:         sdk.Logger(),
		minInterval: minimumSMARTInterval,
	}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "nvme",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{
			Capabilities:  []string{"CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH"},
			ReadOnlyPaths: []string{"/sys/class/nvme", "/sys/devices"},
			Devices:       []string{"/dev/nvme*"},
		},
	}
}

// Configure validates the settings and (re)starts the SMART poller.
func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	if p.confineErr != nil {
		return p.confineErr
	}
	c := defaultConfig(p.minInterval)
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	// A family the prefix would give a Crusoe name of another meaning is
	// left out, not renamed: a dashboard reading that name must not get
	// this family's values (plexporter-nvme.rules.yml records the Crusoe
	// meaning from nvme_smart_available).
	omitted := map[*sdk.Desc]bool{}
	for _, d := range catalogue {
		if why, ok := crusoeConflicts[cfg.MetricPrefix+d.Name]; ok {
			omitted[d] = true
			p.log.Warn("metric_prefix leaves a family out: under this prefix its name is a Crusoe exporter's name of another meaning; plexporter-nvme.rules.yml records that name",
				"metric_prefix", cfg.MetricPrefix, "family", d.Name, "would_be", cfg.MetricPrefix+d.Name, "crusoe_meaning", why)
		}
	}
	// Allowlist pushdown: when nobody wants the SMART families the poller
	// does not run and no device is opened.
	smartOn := c.smartEnabled() && cfg.AnyEnabled(smartDescs...)

	p.Close() // a second Configure replaces the previous poller
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sysfs = cfg.Paths.Sysfs
	p.smartOff = !smartOn
	p.omitted = omitted
	if smartOn {
		p.poller = newPoller(cfg.Paths.Sysfs, c.DevDir, c.SMARTInterval.Duration, p.open, p.now, p.log, func() { p.errs.Add(collectorSMART, 1) })
		p.poller.start()
	}
	return nil
}

// Close stops the SMART poller and waits for it (sdk.Closer: Serve calls
// it when the host stops the plugin; a re-Configure and tests do too).
func (p *plugin) Close() error {
	p.mu.Lock()
	pl := p.poller
	p.poller = nil
	p.mu.Unlock()
	if pl != nil {
		pl.stop()
	}
	return nil
}

// Collect reads identity from sysfs and serves SMART from the poller cache;
// it never issues an ioctl itself.
func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	sysfs, pl, smartOff, omitted := p.sysfs, p.poller, p.smartOff, p.omitted
	p.mu.Unlock()
	if !omitted[descCollectionErrors] {
		defer p.writeErrors(w)
	}

	names, err := listControllers(sysfs)
	if err != nil {
		p.errs.Fail(w, collectorControllers, err)
		return nil
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, err := readIdentity(sysfs, name)
		if err != nil {
			p.errs.Fail(w, collectorIdentity, err)
		} else {
			for _, e := range id.Errs {
				p.errs.Fail(w, collectorIdentity, e)
			}
			w.Gauge(descInfo, 1, name, id.Serial, id.Model, id.FirmwareRev, id.Transport, id.Address, id.Cntlid)
			if id.State != "" {
				w.Gauge(descControllerState, 1, name, id.State)
			}
		}
		if w.AnyEnabled(namespaceDescs...) {
			p.writeNamespaces(w, sysfs, name)
		}

		switch {
		case smartOff:
			w.Gauge(descSMARTAvailable, 0, name)
		case pl != nil:
			// Failed reads are counted by the poller when they happen;
			// here each is reported once, unless it is the missing
			// privilege the poller has already logged.
			st, unreported, ok := pl.state(name)
			if unreported != nil && !isPermission(unreported) {
				w.Error(collectorSMART, fmt.Errorf("%s: %w", name, unreported))
			}
			if ok {
				w.Gauge(descSMARTAvailable, sdk.Bool(st.Available), name)
			}
			if st.Log != nil {
				w.Gauge(descSMARTLastSuccess, sdk.UnixSeconds(st.LastSuccess), name)
				writeSMART(w, name, id.Serial, st.Log)
			}
		}
	}
	return nil
}

// writeNamespaces writes the namespace families of one controller; a
// value sysfs does not have gets no sample.
func (p *plugin) writeNamespaces(w *sdk.Writer, sysfs, ctrl string) {
	nss, errs := readNamespaces(sysfs, ctrl)
	for _, e := range errs {
		p.errs.Fail(w, collectorIdentity, e)
	}
	for _, ns := range nss {
		w.Gauge(descNamespaceInfo, 1, ctrl, ns.Name, ns.NSID, ns.ANAState)
		if ns.HasSize {
			w.Gauge(descNamespaceSize, float64(ns.SizeBytes), ctrl, ns.Name)
		}
		if ns.HasUsed {
			w.Gauge(descNamespaceUsed, float64(ns.UsedBytes), ctrl, ns.Name)
		}
		if ns.HasBlockSize {
			w.Gauge(descNamespaceBlockSize, float64(ns.BlockSize), ctrl, ns.Name)
		}
	}
}

// writeErrors writes nvme_collection_errors_total, every collector from
// the first scrape on so that rate() works from zero.
func (p *plugin) writeErrors(w *sdk.Writer) {
	p.errs.Write(w, descCollectionErrors, errorCollectors...)
}

// writeSMART writes the decoded log page of one controller.
func writeSMART(w *sdk.Writer, dev, serial string, l *smartLog) {
	for bit, name := range criticalWarningBits {
		w.Gauge(descCriticalWarning, float64(l.CriticalWarning>>bit&1), dev, serial, name)
	}
	w.Counter(descMediaErrors, l.MediaErrors.Float64(), dev)
	w.Counter(descErrorLogEntries, l.ErrorLogEntries.Float64(), dev)
	w.Gauge(descPercentageUsed, float64(l.PercentageUsed), dev)
	w.Gauge(descAvailableSpare, float64(l.AvailableSparePct)/100, dev)
	w.Gauge(descAvailableSpareThreshold, float64(l.AvailableSpareThreshPct)/100, dev)
	w.Counter(descPowerOn, l.PowerOnHours.Float64()*secondsPerHour, dev)
	w.Counter(descPowerCycles, l.PowerCycles.Float64(), dev)
	w.Counter(descUnsafeShutdowns, l.UnsafeShutdowns.Float64(), dev)
	w.Counter(descDataRead, l.DataUnitsRead.Float64()*bytesPerDataUnit, dev)
	w.Counter(descDataWritten, l.DataUnitsWritten.Float64()*bytesPerDataUnit, dev)
	w.Counter(descHostReadCommands, l.HostReadCommands.Float64(), dev)
	w.Counter(descHostWriteCommands, l.HostWriteCommands.Float64(), dev)
	w.Counter(descControllerBusy, l.ControllerBusyMin.Float64()*secondsPerMinute, dev)
	if l.CompositeTemperatureK != 0 {
		w.Gauge(descTemperature, kelvinToCelsius(l.CompositeTemperatureK), dev, "composite")
	}
	for i, k := range l.TemperatureSensorK {
		if k != 0 {
			w.Gauge(descTemperature, kelvinToCelsius(k), dev, sensorNames[i])
		}
	}
	w.Counter(descWarningTempTime, float64(l.WarningTempTimeMin)*secondsPerMinute, dev)
	w.Counter(descCriticalTempTime, float64(l.CriticalTempTimeMn)*secondsPerMinute, dev)
	w.Counter(descThermalTransitions, float64(l.ThermalMgmtT1Transitions), dev, "1")
	w.Counter(descThermalTransitions, float64(l.ThermalMgmtT2Transitions), dev, "2")
	w.Counter(descThermalSeconds, float64(l.ThermalMgmtT1Seconds), dev, "1")
	w.Counter(descThermalSeconds, float64(l.ThermalMgmtT2Seconds), dev, "2")
}

var sensorNames = [8]string{"sensor1", "sensor2", "sensor3", "sensor4", "sensor5", "sensor6", "sensor7", "sensor8"}

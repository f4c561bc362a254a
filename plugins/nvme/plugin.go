package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/plexporter/plexporter/sdk"
)

const (
	pluginName            = "nvme"
	pluginVersion         = "0.1.0"
	defaultSMARTInterval  = 5 * time.Minute
	minimumSMARTInterval  = 10 * time.Second
	defaultDevDir         = "/dev"
	collectorIdentity     = "identity"
	collectorSMART        = "smart"
	collectorControllerLs = "controllers"
)

// config is the plugin's section of the host configuration.
type config struct {
	// SMART enables the SMART/Health log poller (default true).
	SMART *bool `json:"smart"`
	// SMARTInterval is how often each controller's log page is read.
	SMARTInterval duration `json:"smart_interval"`
	// DevDir holds the controller character devices (nvme0, ...).
	DevDir string `json:"dev_dir"`
}

// duration decodes "5m"/"90s" strings (or a number of seconds).
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return err
		}
		*d = duration(p)
	case float64:
		*d = duration(x * float64(time.Second))
	default:
		return fmt.Errorf("duration must be a string like \"5m\" or a number of seconds, got %s", b)
	}
	return nil
}

// nvmePlugin exports NVMe controller identity (sysfs, every scrape) and the
// SMART/Health log (admin ioctl, polled in the background).
type nvmePlugin struct {
	open        openFunc
	now         func() time.Time
	log         hclog.Logger
	minInterval time.Duration

	mu        sync.Mutex
	sysfs     string
	poller    *poller           // nil when SMART is off
	identErrs map[string]uint64 // unreadable identity attributes per controller
	smartOff  bool
}

func newPlugin() *nvmePlugin {
	return &nvmePlugin{
		open:        openIoctlDevice,
		now:         time.Now,
		log:         sdk.Logger(),
		minInterval: minimumSMARTInterval,
	}
}

func (p *nvmePlugin) Info() sdk.Info {
	return sdk.Info{
		Name:    pluginName,
		Version: pluginVersion,
		Metrics: catalogue(),
		Sandbox: sdk.SandboxHints{
			Capabilities:  []string{"CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH"},
			ReadOnlyPaths: []string{"/sys/class/nvme", "/sys/devices"},
			Devices:       []string{"/dev/nvme*"},
		},
	}
}

// Configure validates the settings and (re)starts the SMART poller.
func (p *nvmePlugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := config{SMARTInterval: duration(defaultSMARTInterval), DevDir: defaultDevDir}
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if iv := time.Duration(c.SMARTInterval); iv < p.minInterval {
		return fmt.Errorf("nvme: smart_interval %s is below the minimum of %s", iv, p.minInterval)
	}
	if c.DevDir == "" {
		return fmt.Errorf("nvme: dev_dir must not be empty")
	}
	smartOn := c.SMART == nil || *c.SMART
	if smartOn && !anyEnabled(cfg, smartDescs) {
		smartOn = false // allowlist pushdown: nobody wants the SMART families
	}

	p.Close() // a second Configure replaces the previous poller
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sysfs = cfg.Paths.Sysfs
	p.identErrs = map[string]uint64{}
	p.smartOff = !smartOn
	if smartOn {
		p.poller = newPoller(cfg.Paths.Sysfs, c.DevDir, time.Duration(c.SMARTInterval), p.open, p.now, p.log)
		p.poller.start()
	}
	return nil
}

// anyEnabled mirrors Writer.Enabled for Configure time.
func anyEnabled(cfg sdk.Config, ds []*sdk.Desc) bool {
	for _, d := range ds {
		if cfg.Filter.Allow(d.Name) || (cfg.MetricPrefix != "" && cfg.Filter.Allow(cfg.MetricPrefix+d.Name)) {
			return true
		}
	}
	return false
}

// Close stops the SMART poller and waits for it. The plugin process exits
// without calling it; tests and a re-Configure do.
func (p *nvmePlugin) Close() {
	p.mu.Lock()
	pl := p.poller
	p.poller = nil
	p.mu.Unlock()
	if pl != nil {
		pl.stop()
	}
}

// Collect reads identity from sysfs and serves SMART from the poller cache;
// it never issues an ioctl itself.
func (p *nvmePlugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	sysfs, pl, smartOff := p.sysfs, p.poller, p.smartOff
	p.mu.Unlock()

	names, err := listControllers(sysfs)
	if err != nil {
		w.Error(collectorControllerLs, err)
		return nil
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, err := readIdentity(sysfs, name)
		nerr := uint64(len(id.Errs))
		if err != nil {
			w.Error(collectorIdentity, err)
			nerr++
		} else {
			for _, e := range id.Errs {
				w.Error(collectorIdentity, e)
			}
			w.Gauge(infoDesc, 1, name, id.Serial, id.Model, id.FirmwareRev, id.Transport, id.Address)
			if id.State != "" {
				w.Gauge(stateDesc, 1, name, id.State)
			}
		}
		p.mu.Lock()
		p.identErrs[name] += nerr
		errs := p.identErrs[name]
		p.mu.Unlock()

		switch {
		case smartOff:
			w.Gauge(smartAvailableDesc, 0, name)
		case pl != nil:
			st, unreported, ok := pl.state(name)
			errs += st.Errors
			if unreported != nil && !isPermission(unreported) {
				w.Error(collectorSMART, fmt.Errorf("%s: %w", name, unreported))
			}
			if ok {
				w.Gauge(smartAvailableDesc, b2f(st.Available), name)
			}
			if st.Log != nil {
				w.Gauge(smartLastSuccessDesc, float64(st.LastSuccess.UnixNano())/1e9, name)
				writeSMART(w, name, id.Serial, st.Log)
			}
		}
		w.Counter(collectionErrorsDesc, float64(errs), name)
	}
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

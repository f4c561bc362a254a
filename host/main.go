// Command plexporter is the plugin host: it discovers collector plugins,
// runs each as its own process, and serves their merged samples on /metrics.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/hashicorp/go-hclog"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	webflag "github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/launch"
	"github.com/plexporter/plexporter/host/internal/push"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/host/internal/scrape"
	"github.com/plexporter/plexporter/host/internal/supervise"
	hostweb "github.com/plexporter/plexporter/host/internal/web"
	"github.com/plexporter/plexporter/internal/guard"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// flags holds every command-line setting.
type flags struct {
	pluginDirs       []string
	configFile       string
	scrapeTimeout    time.Duration
	startTimeout     time.Duration
	maxSeries        int
	cpuDemotion      time.Duration
	maxLabelLen      int
	enabledMetrics   string
	disabledMetrics  string
	sysfs, procfs    string
	rootfs           string
	metricsPath      string
	maxRequests      int
	maxConns         int
	maxScrapeTimeout time.Duration
	enableLifecycle  bool
	markdown         bool
	sandbox          bool
	allowRoot        bool
	anyUnixConnect   bool
	insecurePerms    bool
	allowMissingDir  bool
	runtimeDir       string
	readyMinPlugins  int
	deviceInclude    string
	deviceExclude    string
	push             pushFlags
	check            checkFlags
}

// pushFlags are the --push.* flags: the one target, each, when given,
// winning over the config file's single push: mapping; with a list of
// targets in the file they are an error (newPushers).
type pushFlags struct {
	url               string
	protocol          string
	interval          time.Duration
	maxPendingSamples int
	flushTimeout      time.Duration
	spoolDir          string
}

// given names the first --push.* flag set, as push.<name> ("" for none).
func (pf pushFlags) given() string {
	for _, x := range []struct {
		name string
		set  bool
	}{{"url", pf.url != ""}, {"protocol", pf.protocol != ""}, {"interval", pf.interval > 0}, {"max-pending-samples", pf.maxPendingSamples > 0}, {"flush-timeout", pf.flushTimeout > 0}, {"spool-dir", pf.spoolDir != ""}} {
		if x.set {
			return "push." + x.name
		}
	}
	return ""
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.LaunchArg {
		sandbox.Launch() // the host re-executed as a plugin's sandbox launcher; never returns
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildArg {
		sandbox.LaunchChild() // the launcher below a plugin's PID-namespace init; never returns
	}
	// One P, unless GOMAXPROCS says otherwise. A scrape is a burst of short
	// steps handed between goroutines (HTTP, each plugin's stream, the
	// merge, the encoder); with more Ps the runtime wakes more threads to
	// share them, and the wakeups cost more CPU than they share
	// (docs/performance.md, scenario 2: 1.43 -> 1.13 ms of host CPU per
	// scrape). Concurrent scrapes and plugin streams still overlap their
	// waits; only their CPU work takes turns.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var f flags
	app := kingpin.New("plexporter", "Prometheus exporter for AI/HPC nodes. It runs every collector plugin found in the plugin directories as its own process and serves their merged metrics.\n\nEvery flag can also be set with the environment variable shown; an explicit flag wins. Boolean variables accept y/yes/on/true/enable/1 and n/no/off/false/disable/0.")
	app.HelpFlag.Short('h')
	// Not app.Version: kingpin prints the version to its usage writer,
	// stderr, and `plexporter --version | head -1` should work as for every
	// other exporter.
	app.Flag("version", "Show application version.").PreAction(func(*kingpin.ParseContext) error {
		fmt.Fprintln(os.Stdout, version.Print("plexporter"))
		os.Exit(0)
		return nil
	}).Bool()

	serve := app.Command("serve", "Serve /metrics (the default command).").Default()
	pluginsCmd := app.Command("plugins", "Start every discovered plugin once and print name, version, path, state, last error and series count.")
	metricsCmd := app.Command("metrics", "Print the metric catalogue of every installed plugin.")
	metricsCmd.Flag("markdown", "Print a Markdown table.").BoolVar(&f.markdown)
	checkCmd := app.Command("plugin", "Work with one plugin binary.").Command("check", "Start a plugin binary as the host would and check it against the plugin protocol, rule by rule (docs/plugin-protocol.md, Conformance checklist). Exit status 0 only if no rule fails.")
	checkCmd.Arg("binary", "The plugin executable, plexporter-<name>; its manifest plexporter-<name>.yaml beside it and its section of --config.file are used as the host would.").Required().StringVar(&f.check.binary)
	checkCmd.Flag("sandbox", "auto: as the host would, sandboxed when run as root (in the manifest's sandbox, or with no grants without a manifest) and unconfined otherwise; on: always (root only); off: unconfined.").Default("auto").EnumVar(&f.check.sandbox, "auto", "on", "off")
	checkCmd.Flag("format", "Output: text (one line per rule) or json.").Default("text").EnumVar(&f.check.format, "text", "json")
	checkCmd.Flag("config", "A config file in --config.file's format whose plugins.<name> section is used (same as --config.file).").StringVar(&f.configFile)

	app.Flag("plugin.dir", "Plugin directory, repeatable; later directories win on name clashes. The env var takes a comma-separated list.").
		Default("/usr/lib/plexporter/plugins", "/etc/plexporter/plugins.d").StringsVar(&f.pluginDirs)
	app.Flag("plugin.allow-missing-dir", "Start (and rescan) even if a --plugin.dir does not exist, with a warning; by default a missing plugin directory is an error naming it, since a mistyped --plugin.dir would otherwise give a ready exporter with no plugin.").BoolVar(&f.allowMissingDir)
	app.Flag("config.file", "Optional YAML file with per-plugin settings (enabled, timeout, metric_prefix, max_series, config, manifest overrides).").StringVar(&f.configFile)
	app.Flag("scrape.timeout", "How long each plugin's Collect may take; a late plugin contributes nothing to that scrape.").Default("5s").SetValue((*durationFlag)(&f.scrapeTimeout))
	app.Flag("plugin.start-timeout", "How long a plugin may take to start, handshake and accept its configuration.").Default("10s").SetValue((*durationFlag)(&f.startTimeout))
	app.Flag("plugin.max-series", "Series one plugin may contribute to a scrape; the excess is dropped and counted.").Default("100000").IntVar(&f.maxSeries)
	app.Flag("plugin.cpu-demotion", "A sandboxed plugin that sends more partial errors or log lines than its budget gets the lowest CPU weight of its cgroup while it does and for this long after (plexporter_plugin_cpu_demoted); 0 never demotes.").Default("1m").SetValue((*durationFlag)(&f.cpuDemotion))
	app.Flag("plugin.max-label-length", "Longest label value accepted, in bytes; longer ones drop their series.").Default(strconv.Itoa(guard.DefaultMaxLabelValueLen)).IntVar(&f.maxLabelLen)
	app.Flag("plugin.sandbox", "Confine each plugin to its manifest (needs root). --no-plugin.sandbox runs plugins as the host's user, unconfined: development only.").Default("true").BoolVar(&f.sandbox)
	app.Flag("plugin.allow-root", "Allow plugins whose manifest sets allow_root to run as uid 0.").BoolVar(&f.allowRoot)
	app.Flag("plugin.allow-any-unix-connect", "Run plugins whose network grant needs connect(2) on kernels whose Landlock (ABI < 9) cannot restrict it to the granted unix sockets: such a plugin can connect to every unix socket its user may write.").BoolVar(&f.anyUnixConnect)
	app.Flag("plugin.runtime-dir", "Directory for the plugins' sockets; the host makes one subdirectory per instance in it and, at start, removes those of hosts that are gone. Default: $RUNTIME_DIRECTORY (systemd's RuntimeDirectory=), else /run/plexporter as root, else $XDG_RUNTIME_DIR/plexporter, else $TMPDIR/plexporter-<uid>.").StringVar(&f.runtimeDir)
	app.Flag("plugin.insecure-permissions", "Run plugin binaries and read their manifests and the config file even if they, a directory above them or a symlink on the way is writable by group/others or owned by a user other than root and the host's.").BoolVar(&f.insecurePerms)
	app.Flag("metrics.enabled", "Comma-separated globs of metric families to expose (base names: a counter matches without _total). Unset: all.").Envar("PLEXPORTER_ENABLED_METRICS").StringVar(&f.enabledMetrics)
	app.Flag("metrics.disabled", "Comma-separated globs of metric families to hide, applied after --metrics.enabled.").Envar("PLEXPORTER_DISABLED_METRICS").StringVar(&f.disabledMetrics)
	app.Flag("device.include", "Regular expression (RE2, unanchored) of the devices to expose: series whose device label it does not match are left out, whichever plugin writes them (RDMA devices, NVMe controllers, disks). Series without a device label are kept. Unset: all.").Envar("PLEXPORTER_DEVICE_INCLUDE").StringVar(&f.deviceInclude)
	app.Flag("device.exclude", "Regular expression (RE2, unanchored) of the devices to leave out, applied after --device.include: --device.exclude='^mlx5_1$' removes mlx5_1 from the rdma plugin's counters and the ethtool plugin's rdma_* families alike.").Envar("PLEXPORTER_DEVICE_EXCLUDE").StringVar(&f.deviceExclude)
	app.Flag("path.sysfs", "sysfs mount point, passed to every plugin.").Default("/sys").StringVar(&f.sysfs)
	app.Flag("path.procfs", "procfs mount point, passed to every plugin.").Default("/proc").StringVar(&f.procfs)
	app.Flag("path.rootfs", "Root filesystem mount point, passed to every plugin.").Default("/").StringVar(&f.rootfs)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.metricsPath)
	app.Flag("web.max-requests", "Maximum number of concurrent scrape requests; 0 disables the limit.").Default("40").IntVar(&f.maxRequests)
	app.Flag("web.max-connections", "Maximum number of open HTTP connections; over it, a new connection closes the one idle longest. 0 disables the limit.").Default("512").IntVar(&f.maxConns)
	app.Flag("web.max-scrape-timeout", "Longest scrape timeout a client may announce in X-Prometheus-Scrape-Timeout-Seconds; a larger one is cut to it.").Default("2m").SetValue((*durationFlag)(&f.maxScrapeTimeout))
	app.Flag("web.enable-lifecycle", "Serve POST /-/reload (what SIGHUP does). Off: it answers 403, and only SIGHUP (systemctl reload) reloads.").BoolVar(&f.enableLifecycle)
	app.Flag("web.ready-min-plugins", "/ready answers 503 until at least this many plugins run (0: ready once every plugin has started or failed its first start, even with none).").Default("0").IntVar(&f.readyMinPlugins)
	app.Flag("push.url", "Push the merged snapshot that /metrics serves to this endpoint, with --push.protocol (remote write: Prometheus --web.enable-remote-write-receiver: http://host:9090/api/v1/write; Mimir: .../api/v1/push; OTLP: the whole path, http://collector:4318/v1/metrics), on its own interval, while /metrics keeps serving scrapes. Off unless this flag or push.url in --config.file is set; the push: section of --config.file holds the rest (external_labels, headers, basic_auth, authorization, bearer_token_file, tls_config, ... as in Prometheus's remote_write). Samples not yet accepted wait in a memory ring and are sent oldest first; 5xx and 429 are retried with backoff (Retry-After honoured), other 4xx dropped and counted (plexporter_push_*, labelled remote_name and url). The --push.* flags set one target: they win over a single push: mapping in --config.file; several targets (push: as a list, each with its own name, url, protocol, spool_dir, ...) are set in the file only, and a --push.* flag beside such a list is an error.").StringVar(&f.push.url)
	app.Flag("push.protocol", "What --push.url takes: prometheus.remote_write.v1 (Prometheus remote write 1.0: any remote write receiver), prometheus.remote_write.v2 (remote write 2.0, with each series' type, help and unit: Prometheus >= 3.0 with --web.enable-remote-write-receiver and --web.remote-write-receiver.accepted-protobuf-messages=io.prometheus.write.v2.Request, Mimir) or otlp (OTLP/HTTP protobuf: an OpenTelemetry Collector's otlphttp receiver, VictoriaMetrics' /opentelemetry/v1/metrics, Prometheus >= 3.0's /api/v1/otlp/v1/metrics with --web.enable-otlp-receiver) (default: push.protocol in --config.file, else prometheus.remote_write.v1).").EnumVar(&f.push.protocol, config.PushProtocols...)
	app.Flag("push.interval", "How often to take and push a snapshot (default: push.interval in --config.file, else 15s).").SetValue((*durationFlag)(&f.push.interval))
	app.Flag("push.max-pending-samples", "Bound of the memory ring of samples not yet accepted by the receiver (with --push.spool-dir: of those held in memory, not on disk); past it the oldest snapshot is dropped, counted in plexporter_push_samples_dropped_total{reason=\"ring_full\"} (default: push.max_pending_samples, else 500000: 12 bytes a sample, plus each label set once).").IntVar(&f.push.maxPendingSamples)
	app.Flag("push.flush-timeout", "On shutdown, how long to go on sending what is pending before dropping it, counted (default: push.flush_timeout, else 10s).").SetValue((*durationFlag)(&f.push.flushTimeout))
	app.Flag("push.spool-dir", "Keep unsent snapshots in this directory (made mode 0700) across restarts and crashes, in every protocol (one file a snapshot, its requests as posted; in memory only where the file is); the next start sends them first (files of another --push.protocol are dropped, counted). Bounded by push.spool_max_bytes (512 MiB) and push.spool_max_age (1h) in --config.file (default: push.spool_dir, else none: a restart loses what is unsent).").StringVar(&f.push.spoolDir)
	toolkitFlags := webflag.AddFlags(app, ":9880")
	logConfig := &promslog.Config{}
	promslogflag.AddFlags(app, logConfig)

	setEnvVars(app)
	if err := checkBoolEnv(app); err != nil {
		fmt.Fprintln(os.Stderr, "plexporter:", err)
		return 2
	}
	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "plexporter: %v; try --help\n", err)
		return 2
	}
	f.pluginDirs = splitDirs(f.pluginDirs)
	log := promslog.New(logConfig)

	filter, err := metricfilter.New(metricfilter.Split(f.enabledMetrics), metricfilter.Split(f.disabledMetrics))
	if err != nil {
		log.Error("bad metric filter", "err", err)
		return 2
	}
	devices, err := deviceFilter(f.deviceInclude, f.deviceExclude)
	if err != nil {
		log.Error("bad device filter", "err", err)
		return 2
	}
	runtimeDir, err := launch.OpenRuntimeDir(f.runtimeDir, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer runtimeDir.Close()
	defaults := supervise.Settings{
		Timeout:      f.scrapeTimeout,
		StartTimeout: f.startTimeout,
		Enabled:      filter.Allowed(),
		Disabled:     filter.Denied(),
		// The plugins leave the devices the filter rejects untouched;
		// the merge removes their series either way.
		DeviceInclude: f.deviceInclude,
		DeviceExclude: f.deviceExclude,
		Paths:         &pluginv1.Paths{Sysfs: f.sysfs, Procfs: f.procfs, Rootfs: f.rootfs},
		LogLevel:      hclogLevel(logConfig),
		MaxSeries:     f.maxSeries,
		SocketParent:  runtimeDir.Path,
		CPUDemotion:   f.cpuDemotion,
	}
	fleetOptions := fleet.Options{
		Dirs:                f.pluginDirs,
		ConfigFile:          f.configFile,
		AllowRoot:           f.allowRoot,
		AllowAnyUnixConnect: f.anyUnixConnect,
		InsecurePermissions: f.insecurePerms,
		AllowMissingDirs:    f.allowMissingDir,
		Defaults:            defaults,
	}
	if cmd == checkCmd.FullCommand() {
		return checkPlugin(f, fleetOptions, log)
	}
	sandboxed := f.sandbox && os.Geteuid() == 0
	switch {
	case !f.sandbox:
		log.Warn("plugin sandbox switched off (--no-plugin.sandbox): every plugin runs unconfined as the host's user; plexporter_plugin_sandboxed is 0")
	case !sandboxed:
		log.Warn("not running as root: plugins run unconfined as this user (development mode); plexporter_plugin_sandboxed is 0")
	}
	if err := sandbox.CheckHost(); sandboxed && err != nil {
		log.Error("cannot sandbox plugins", "err", err)
		return 1
	}
	fleetOptions.Sandbox = sandboxed
	// push: is read once, at start (newPushers); a reload that changes it
	// says that it takes a restart.
	var pushAtStart, pushLast []*config.Push
	var pushSeen bool
	fleetOptions.Loaded = func(c *config.File) {
		targets := c.PushTargets()
		switch {
		case !pushSeen:
			pushAtStart, pushLast, pushSeen = targets, targets, true
		case reflect.DeepEqual(targets, pushLast):
		case reflect.DeepEqual(targets, pushAtStart):
			pushLast = targets
			log.Info("the push: section of the config file is as at the start again", "file", f.configFile)
		default:
			pushLast = targets
			log.Warn("the push: section of the config file changed; push keeps its settings from the start until plexporter restarts", "file", f.configFile)
		}
	}
	fl := fleet.New(fleetOptions, log)

	switch cmd {
	case pluginsCmd.FullCommand():
		return listPlugins(fl, filter, f.maxLabelLen)
	case metricsCmd.FullCommand():
		return listMetrics(fl, f.markdown)
	case serve.FullCommand():
		return serveMetrics(fl, filter, devices, f, toolkitFlags, log)
	}
	return 2
}

func serveMetrics(fl *fleet.Fleet, filter *metricfilter.Filter, devices *guard.DeviceFilter, f flags, toolkitFlags *web.FlagConfig, log *slog.Logger) int {
	log.Info("starting plexporter", "version", version.Info(), "plugin_dirs", strings.Join(f.pluginDirs, ","))
	// Listen before any plugin starts: a taken or mistyped address is
	// reported at once, with no plugin process started for nothing.
	listeners, err := listen(toolkitFlags)
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	for _, l := range listeners {
		defer l.Close()
	}
	if err := fl.Reconcile(); err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer fl.StopAll()
	go warnUnmatched(fl, filter, log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go fl.Watch(ctx, hup)

	scraper := scrape.New(fl, filter, devices, f.maxLabelLen, log)
	pushers, err := newPushers(fl, scraper, f.push, f.configFile, log)
	if err != nil {
		log.Error("cannot push", "err", err)
		return 1
	}
	pushed := make(chan struct{})
	if len(pushers) == 0 {
		close(pushed)
	} else {
		go func() {
			defer close(pushed)
			// The first snapshot after every plugin's first start, so the
			// push does not begin with a snapshot of the host alone.
			firstStarts(ctx, fl, f.startTimeout)
			push.RunAll(ctx, pushers...)
		}()
	}
	handler, err := hostweb.Handler(scraper, func() error { return fl.Readiness(f.readyMinPlugins) }, hostweb.Options{MetricsPath: f.metricsPath, MaxRequests: f.maxRequests, Version: version.Info(), WriteTimeout: f.scrapeTimeout, MaxScrapeTimeout: f.maxScrapeTimeout, EnableLifecycle: f.enableLifecycle, Reload: func() error { return fl.Rescan("POST /-/reload") }}, log)
	if err != nil {
		log.Error("web", "err", err)
		return 1
	}
	srv := hostweb.Server(handler, f.maxConns)
	errc := make(chan error, 1)
	go func() {
		if listeners == nil {
			errc <- web.ListenAndServe(srv, toolkitFlags, log)
			return
		}
		errc <- web.ServeMultiple(listeners, srv, toolkitFlags, log)
	}()
	select {
	case err := <-errc:
		log.Error("web server", "err", err)
		return 1
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("shutdown", "err", err)
		}
		<-pushed // every target's flush at once, each within its flush timeout; plugins stop after it
		return 0
	}
}

// newPushers returns the push sinks, one per target, that the push:
// section of the config file and the --push.* flags describe, registered
// for /metrics; none when push is off (no URL). The flags set the one
// target of a single push: mapping (or of none); with a list of targets
// in the file a flag is an error, naming it.
func newPushers(fl *fleet.Fleet, scraper *scrape.Scraper, pf pushFlags, configFile string, log *slog.Logger) ([]*push.Pusher, error) {
	file, err := fl.Config()
	if err != nil {
		return nil, err
	}
	var targets []config.Push
	if len(file.PushList) > 0 {
		if flag := pf.given(); flag != "" {
			return nil, fmt.Errorf("--%s (or %s) is set, but the push: section of %s is a list of %d targets: the --push.* flags set the one target of a single push: mapping and do not apply to a list; set the key in each target of the list instead and drop the flag", flag, envName(flag), configFile, len(file.PushList))
		}
		for _, c := range file.PushList {
			targets = append(targets, *c)
		}
	} else {
		var c config.Push
		if file.Push != nil {
			c = *file.Push
		} else {
			c.HTTPClientConfig = promconfig.DefaultHTTPClientConfig
		}
		if pf.url != "" {
			c.URL = pf.url
		}
		if c.URL == "" {
			return nil, nil
		}
		if pf.protocol != "" {
			c.Protocol = pf.protocol
		}
		if pf.interval > 0 {
			c.Interval = pf.interval
		}
		if pf.maxPendingSamples > 0 {
			c.MaxPendingSamples = pf.maxPendingSamples
		}
		if pf.flushTimeout > 0 {
			c.FlushTimeout = pf.flushTimeout
		}
		if pf.spoolDir != "" {
			c.SpoolDir = pf.spoolDir
		}
		targets = append(targets, c)
	}
	// The same round as a scrape of /metrics without a selection: every
	// plugin, merged and guarded once, with the host's own families.
	// Targets of one interval share each round (push.RunAll).
	src := func(ctx context.Context) []*guard.Family { return scraper.Scrape(ctx, scrape.Selection{}) }
	var ps []*push.Pusher
	for _, c := range targets {
		p, err := push.New(c, src, "plexporter/"+version.Version, log)
		if err != nil {
			return nil, err
		}
		if err := scraper.Register(p); err != nil {
			return nil, fmt.Errorf("push: %s: %w", p.Name(), err)
		}
		c = push.WithDefaults(c)
		if c.Protocol == "" {
			c.Protocol = config.PushRemoteWriteV1
		}
		log.Info("pushing", "remote_name", p.Name(), "protocol", c.Protocol, "url", p.URL(), "interval", c.Interval, "max_pending_samples", c.MaxPendingSamples, "spool_dir", c.SpoolDir)
		ps = append(ps, p)
	}
	return ps, nil
}

// firstStarts waits until every plugin has started or failed its first
// start, at most d (or until ctx ends).
func firstStarts(ctx context.Context, fl *fleet.Fleet, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, s := range fl.Supervisors() {
		select {
		case <-s.FirstAttempt():
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// listen binds every --web.listen-address. It returns nil listeners, for
// exporter-toolkit's ListenAndServe to make, when systemd passes the
// sockets (bound already) or an address is vsock://, which the toolkit
// listens on itself.
func listen(tf *web.FlagConfig) ([]net.Listener, error) {
	if tf.WebSystemdSocket != nil && *tf.WebSystemdSocket {
		return nil, nil
	}
	addrs := *tf.WebListenAddresses
	if len(addrs) == 0 {
		return nil, errors.New("no --web.listen-address given")
	}
	if slices.ContainsFunc(addrs, func(a string) bool { return strings.HasPrefix(a, "vsock://") }) {
		return nil, nil
	}
	var ls []net.Listener
	for _, addr := range addrs {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, fmt.Errorf("--web.listen-address=%s: %w", addr, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// warnUnmatched warns once about allowlist tokens that select no family of
// any plugin's catalogue (usually a typo), with each plugin's metric_prefix;
// a plugin whose catalogue names its families only at run time is asked
// for them with one Collect.
func warnUnmatched(fl *fleet.Fleet, filter *metricfilter.Filter, log *slog.Logger) {
	if filter.AllowAll() {
		return
	}
	for _, s := range fl.Supervisors() {
		<-s.FirstAttempt()
	}
	names := []string{"plexporter_", "go_", "process_"}
	for _, s := range fl.Supervisors() {
		st, prefix := s.Status(), s.Settings().MetricPrefix
		open := false
		for _, m := range st.Info.GetMetrics() {
			if strings.IndexAny(m.GetName(), "*?[") == 0 {
				// A family named only at run time ("*": plexporter-so's
				// library's): it would excuse every pattern, so the
				// families the plugin sends stand in for it.
				open = true
				continue
			}
			names = append(names, prefix+m.GetName())
			for _, event := range m.GetSelectedBy() {
				names = append(names, prefix+event)
			}
		}
		if open && st.Up() {
			ctx, cancel := context.WithTimeout(context.Background(), s.Settings().Timeout)
			c := s.Collect(ctx)
			cancel()
			res := guard.Merge([]guard.Input{{Plugin: st.Name, Batches: c.Batches, MaxSeries: s.Settings().MaxSeries}}, guard.Options{Filter: filter})
			for _, fam := range res.Families {
				names = append(names, fam.Name)
			}
		}
	}
	for _, p := range filter.Unmatched(names) {
		log.Warn("metric filter pattern matches no family in any plugin's catalogue", "pattern", p)
	}
}

// durationFlag is a duration flag whose error shows a good duration
// (kingpin's says only that it is not one).
type durationFlag time.Duration

func (d *durationFlag) Set(s string) error {
	v, err := config.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationFlag(v)
	return nil
}

func (d *durationFlag) String() string { return time.Duration(*d).String() }

// setEnvVars gives every flag its PLEXPORTER_* environment variable.
func setEnvVars(app *kingpin.Application) {
	for _, fl := range app.Model().Flags {
		if fl.Name == "help" || fl.Name == "version" || fl.Envar != "" {
			continue
		}
		app.GetFlag(fl.Name).Envar(envName(fl.Name))
	}
}

func envName(flag string) string {
	return "PLEXPORTER_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(flag))
}

var (
	trueWords  = map[string]bool{"y": true, "yes": true, "on": true, "true": true, "enable": true, "1": true}
	falseWords = map[string]bool{"n": true, "no": true, "off": true, "false": true, "disable": true, "0": true}
)

// checkBoolEnv validates boolean environment variables with the words
// operators use, and rewrites them to what kingpin parses.
func checkBoolEnv(app *kingpin.Application) error {
	for _, fl := range app.Model().Flags {
		if !fl.IsBoolFlag() || fl.Name == "help" || fl.Name == "version" {
			continue
		}
		env := fl.Envar
		v, ok := os.LookupEnv(env)
		if !ok {
			continue
		}
		switch w := strings.ToLower(strings.TrimSpace(v)); {
		case trueWords[w]:
			os.Setenv(env, "true")
		case falseWords[w]:
			os.Setenv(env, "false")
		default:
			return fmt.Errorf("environment variable %s=%q is not a boolean (use y/yes/on/true/enable/1 or n/no/off/false/disable/0)", env, v)
		}
	}
	return nil
}

// splitDirs accepts comma-separated lists (the env var form) in any value.
func splitDirs(in []string) []string {
	var out []string
	for _, v := range in {
		out = append(out, metricfilter.Split(v)...)
	}
	return out
}

func hclogLevel(c *promslog.Config) hclog.Level {
	if c.Level == nil {
		return hclog.Info
	}
	return hclog.LevelFromString(c.Level.String())
}

// deviceFilter compiles --device.include and --device.exclude; an error
// names the flag.
func deviceFilter(include, exclude string) (*guard.DeviceFilter, error) {
	var d guard.DeviceFilter
	for _, x := range []struct {
		flag, expr string
		dst        **regexp.Regexp
	}{{"--device.include", include, &d.Include}, {"--device.exclude", exclude, &d.Exclude}} {
		if x.expr == "" {
			continue
		}
		re, err := regexp.Compile(x.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", x.flag, err)
		}
		*x.dst = re
	}
	return &d, nil
}

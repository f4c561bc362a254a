// Package supervise runs one plugin: it starts the process
// (host/internal/launch), asks Info and Configure, serves coalesced Collect
// calls, and restarts a plugin that crashed or hung: after a second, backing
// off only for a crash loop (restart.go). Its State says where the plugin
// is in that life (state.go); a plugin that rejects its settings is
// Misconfigured and stays stopped until they change, because restarting it
// would only be rejected again.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/cgroup"
	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/launch"
	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/transport"
)

// Settings for one plugin; host/internal/fleet composes them.
type Settings struct {
	Timeout      time.Duration // per Collect
	StartTimeout time.Duration // process start to handshake, Info and Configure
	MetricPrefix string
	Config       *structpb.Struct
	Enabled      []string
	Disabled     []string
	// DeviceInclude and DeviceExclude are the host's --device.include and
	// --device.exclude, passed on so that a plugin leaves rejected devices
	// untouched (ConfigureRequest fields 7 and 8).
	DeviceInclude, DeviceExclude string
	Paths                        *pluginv1.Paths
	LogLevel                     hclog.Level
	PassEnv                      []string // host environment variables the manifest lets through, by name
	SHA256                       string   // pin from the manifest; "" for none
	MaxSeries                    int
	// Sandbox confines the plugin (nil: it runs as the host's user, unconfined).
	Sandbox *sandbox.Spec
	// Manifest is the plugin's manifest with the config file's overrides;
	// the plugin's sandbox hints are checked against what it grants.
	Manifest *manifest.Manifest
	// ConfigLocation is where the plugin's config section is, for messages.
	// Equal ignores it: a section moving down a line is no reason to restart.
	ConfigLocation config.Location

	// Restart policy (restart.go): a failure costs MinBackoff; more than
	// CrashBudget failures within CrashWindow are a crash loop, whose
	// delays double up to MaxBackoff until a run lasts HealthyAfter.
	MinBackoff, MaxBackoff, HealthyAfter time.Duration
	CrashBudget                          int
	CrashWindow                          time.Duration

	// SocketParent is the directory go-plugin makes each start's socket
	// directory in (the host instance's runtime directory); "" for $TMPDIR.
	SocketParent string

	// CPUDemotion is how long a plugin that went past its partial-error or
	// log budget keeps its cgroup's lowest CPU weight after its last
	// offence (demote.go); 0: never demoted. Needs a cgroup.
	CPUDemotion time.Duration
}

func (s Settings) withDefaults() Settings {
	if s.MinBackoff == 0 {
		s.MinBackoff = time.Second
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = time.Minute
	}
	if s.CrashBudget == 0 {
		s.CrashBudget = 5
	}
	if s.CrashWindow == 0 {
		s.CrashWindow = 30 * time.Second
	}
	if s.HealthyAfter == 0 {
		s.HealthyAfter = s.CrashWindow
	}
	if s.StartTimeout == 0 {
		s.StartTimeout = 10 * time.Second
	}
	if s.Timeout == 0 {
		s.Timeout = 5 * time.Second
	}
	return s
}

// Equal reports whether two settings would run a plugin the same way,
// defaults applied. Protobuf fields are compared as messages:
// reflect.DeepEqual also sees their internal caches, which change once a
// message has been marshalled.
func (s Settings) Equal(o Settings) bool {
	s, o = s.withDefaults(), o.withDefaults()
	if !proto.Equal(s.Config, o.Config) || !proto.Equal(s.Paths, o.Paths) {
		return false
	}
	s.Config, o.Config, s.Paths, o.Paths = nil, nil, nil, nil
	s.ConfigLocation, o.ConfigLocation = config.Location{}, config.Location{}
	return reflect.DeepEqual(s, o)
}

func (s Settings) launchOptions() launch.Options {
	return launch.Options{SHA256: s.SHA256, PassEnv: s.PassEnv, LogLevel: s.LogLevel, Sandbox: s.Sandbox, StartTimeout: s.StartTimeout, SocketParent: s.SocketParent}
}

// Status is a snapshot for self-metrics, /ready and `plexporter plugins`.
type Status struct {
	Name, Path, SHA256 string
	State              State
	// LastError says why the plugin is not running: for Misconfigured the
	// plugin's own message about its settings.
	LastError string
	Restarts  int
	// NextStart is when a plugin in Backoff is started again; zero in
	// every other state.
	NextStart time.Time
	Info      *pluginv1.InfoResponse
	Started   bool // the first start attempt is over (ok or not)
	Sandboxed bool
	// WarningsDropped counts Configure warnings past the budget
	// (maxWarnings, maxWarningBytes), LogDropped the plugin's log lines
	// past its log budget (launch.LogBudget), since the supervisor began.
	WarningsDropped, LogDropped uint64
	// Resources are the plugin's cgroup's counters; nil without one.
	Resources *cgroup.Stats
	// Demotion is the plugin's CPU demotion (demote.go); nil without a
	// cgroup or with demotion off.
	Demotion *Demotion
}

// Up reports whether the plugin is running and configured.
func (s Status) Up() bool { return s.State == Running }

// Collection is one Collect's result. Batches received before an error are kept.
type Collection struct {
	Batches []*pluginv1.Batch
	Errors  []*pluginv1.CollectError
	// ErrorsDropped counts the partial errors the budget discarded
	// (wire.LimitsFor): past the count or the bytes one collect may send.
	ErrorsDropped int
	Err           error
	Duration      time.Duration
}

// Supervisor owns one plugin process.
type Supervisor struct {
	plugin   discover.Plugin
	settings Settings
	hostLog  *slog.Logger // untagged, for launch (pluginlog tags the plugin)
	log      *slog.Logger // tagged plugin=<name>

	mu     sync.Mutex
	status Status
	// selectedBy is what SelectedBy returns, from the last Info.
	selectedBy map[string][]string
	client     pluginv1.PluginServiceClient
	proc       *launch.Process
	group      *cgroup.Group // the plugin's cgroup, nil for none (cgroup.go)
	// CPU demotion (demote.go), under mu; demoteMu orders the writes of
	// the group's weight.
	demotion    Demotion
	lastOffence time.Time
	demotedAt   time.Time
	demoteMu    sync.Mutex
	// demoteWarned: a failed demotion was warned about (under demoteMu).
	demoteWarned bool
	// logDrop and demotedNow wake watchBudgets (capacity 1, never block).
	logDrop, demotedNow chan struct{}

	warningsDropped atomic.Uint64
	logDropped      atomic.Uint64 // launch's log budget counts here, across restarts

	timeouts    int  // consecutive timed-out collects
	driftWarned bool // sandbox hints compared with the manifest and found wanting (loop only)
	first       chan struct{}
	firstOnce   sync.Once
	flight      singleflight.Group
	cancel      context.CancelFunc
	done        chan struct{}
}

// New returns a supervisor; Start runs it. log is the host's logger: the
// supervisor tags its lines with the plugin.
func New(p discover.Plugin, s Settings, log *slog.Logger) *Supervisor {
	s = s.withDefaults()
	return &Supervisor{
		plugin:   p,
		settings: s,
		hostLog:  log,
		log:      log.With("plugin", p.Name),
		status:   Status{Name: p.Name, Path: p.Path, State: Starting, Sandboxed: s.Sandbox != nil},
		first:    make(chan struct{}),
		done:     make(chan struct{}),

		logDrop:    make(chan struct{}, 1),
		demotedNow: make(chan struct{}, 1),
	}
}

// Plugin returns what discovery found.
func (s *Supervisor) Plugin() discover.Plugin { return s.plugin }

// Settings returns the settings the supervisor runs with.
func (s *Supervisor) Settings() Settings { return s.settings }

// Start runs the supervision loop in the background.
func (s *Supervisor) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.loop(ctx)
}

// Stop ends the plugin (its whole process group) and waits for the loop. It
// is the host's decision, so it is logged at INFO and below, never as a
// failure.
func (s *Supervisor) Stop() {
	s.cancel()
	<-s.done
}

// FirstAttempt is closed once the first start has succeeded or failed, and
// Status says which.
func (s *Supervisor) FirstAttempt() <-chan struct{} { return s.first }

// Info returns the plugin's last Info answer (nil before the first). It
// is Status().Info without reading the plugin's cgroup counters, which
// Status does on every call: a scrape asks it of every plugin for the
// families' ownership.
func (s *Supervisor) Info() *pluginv1.InfoResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status.Info
}

// Status returns a snapshot, the plugin's cgroup counters read now.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	st := s.status
	group := s.group
	s.mu.Unlock()
	st.WarningsDropped, st.LogDropped = s.warningsDropped.Load(), s.logDropped.Load()
	if group != nil {
		r := group.Stats()
		st.Resources = &r
		if s.settings.CPUDemotion > 0 {
			s.mu.Lock()
			d := s.demotion
			s.mu.Unlock()
			st.Demotion = &d
		}
	}
	return st
}

// become moves to the next state; leaving Running forgets the process, so
// no new Collect reaches it. A transition that allowed does not list is a
// bug in this file: the loop is the only caller.
func (s *Supervisor) become(next State, lastErr string) { s.transition(next, lastErr, time.Time{}) }

// backOff moves to Backoff until the next start, due at nextStart.
func (s *Supervisor) backOff(lastErr string, nextStart time.Time) {
	s.transition(Backoff, lastErr, nextStart)
}

func (s *Supervisor) transition(next State, lastErr string, nextStart time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.status.State.CanBecome(next) {
		panic(fmt.Sprintf("supervise: plugin %s: no transition from %s to %s", s.plugin.Name, s.status.State, next))
	}
	s.status.State = next
	s.status.NextStart = nextStart
	if next != Running {
		s.client, s.proc = nil, nil
	}
	if lastErr != "" || next == Running {
		s.status.LastError = lastErr
	}
}

func (s *Supervisor) loop(ctx context.Context) {
	defer close(s.done)
	s.openGroup()
	defer s.removeGroup() // after the process is stopped
	if s.hasGroup() && s.settings.CPUDemotion > 0 {
		watched := make(chan struct{})
		defer close(watched)
		go s.watchBudgets(watched)
	}
	defer s.firstAttemptOver() // stopped during the first start
	policy := newRestartPolicy(s.settings)
	for {
		var ran time.Duration
		oomBefore := s.oomKills()
		proc, err := s.start(ctx)
		if err == nil {
			s.firstAttemptOver()
			running := time.Now()
			select {
			case <-ctx.Done():
				s.become(Stopped, "")
				proc.Stop()
				return
			case <-proc.Exited():
				err = s.exitError(proc, oomBefore)
			}
			ran = time.Since(running)
		}
		if ctx.Err() != nil {
			s.become(Stopped, "")
			if proc != nil {
				proc.Stop() // exited as the host stopped it: its children
			}
			return
		}
		if s.finalState(err) != Backoff {
			s.firstAttemptOver()
			<-ctx.Done() // until the fleet replaces or stops this supervisor
			s.become(Stopped, "")
			return
		}
		now := time.Now()
		delay, looping := policy.failed(now, ran)
		if looping {
			s.log.Error("plugin down again; crash loop, restarting after a growing delay", "err", err, "backoff", delay, "crash_budget", s.settings.CrashBudget, "window", s.settings.CrashWindow)
		} else {
			s.log.Error("plugin down; restarting", "err", err, "backoff", delay)
		}
		s.backOff(err.Error(), now.Add(delay))
		s.firstAttemptOver()
		if proc != nil {
			proc.Stop() // what is left of it: children, go-plugin's side
		}
		select {
		case <-ctx.Done():
			s.become(Stopped, "")
			return
		case <-time.After(time.Until(now.Add(delay))):
		}
		s.mu.Lock()
		s.status.Restarts++
		s.mu.Unlock()
		s.become(Starting, "")
	}
}

// firstAttemptOver closes FirstAttempt once the first start's outcome is
// in the state: Running, Backoff, Misconfigured or Refused (or Stopped).
func (s *Supervisor) firstAttemptOver() {
	s.firstOnce.Do(func() {
		s.mu.Lock()
		s.status.Started = true
		s.mu.Unlock()
		close(s.first)
	})
}

// finalState moves a plugin whose start failed in a way no restart can fix
// (it rejected its settings, its binary is not the one pinned, its
// handshake named an address the host does not dial, it speaks another
// protocol) to Misconfigured or
// Refused, logs why once, and returns that state; for every other failure
// it returns Backoff and changes nothing.
func (s *Supervisor) finalState(err error) State {
	var rejected *rejectedError
	var pin *launch.PinError
	var address *launch.AddressError
	var protocol *launch.ProtocolError
	switch {
	case errors.As(err, &rejected):
		s.become(Misconfigured, rejected.message)
		loc := s.settings.ConfigLocation
		s.log.Error("plugin rejected its configuration; it stays stopped until its settings change",
			"err", rejected.message, "file", loc.File, "key", loc.Key, "line", loc.Line)
		return Misconfigured
	case errors.As(err, &pin):
		s.become(Refused, pin.Error())
		s.log.Error("plugin refused", "path", s.plugin.Path, "reason", pin.Error())
		return Refused
	case errors.As(err, &address):
		s.become(Refused, address.Error())
		s.log.Error("plugin refused", "path", s.plugin.Path, "reason", address.Error())
		return Refused
	case errors.As(err, &protocol):
		s.become(Refused, protocol.Error())
		s.log.Error("plugin refused", "path", s.plugin.Path, "reason", protocol.Error())
		return Refused
	}
	return Backoff
}

// MaxStartAnswerBytes bounds an Info or Configure answer, enforced by gRPC
// while it is received: a catalogue of a thousand families takes about
// 200 kB, and the host keeps a plugin's Info for as long as it runs.
const MaxStartAnswerBytes = 1 << 20

var maxStartAnswer = grpc.MaxCallRecvMsgSize(MaxStartAnswerBytes)

// tooLarge says in the host's words that an Info or Configure answer
// exceeded MaxStartAnswerBytes: go-plugin would otherwise receive up to
// 2 GiB there, bounded only by the start timeout.
func tooLarge(err error) error {
	if status.Code(err) == codes.ResourceExhausted {
		return fmt.Errorf("the plugin's answer is larger than the %d MiB the host accepts (a catalogue or warnings that big are a plugin bug): %w", MaxStartAnswerBytes>>20, err)
	}
	return err
}

// rejectedError is a Configure that answered INVALID_ARGUMENT: the plugin
// cannot work with these settings. message is the plugin's own text,
// without the gRPC status around it.
type rejectedError struct{ message string }

func (e *rejectedError) Error() string { return "configuration rejected: " + e.message }

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// start launches the process and runs Info and Configure; on any failure
// the process is gone again when it returns.
func (s *Supervisor) start(ctx context.Context) (*launch.Process, error) {
	opts := s.withGroup(s.settings.launchOptions())
	opts.LogDropped = &s.logDropped
	opts.OnLogDrop = s.noteLogDrop
	proc, err := launch.Start(s.plugin, opts, s.hostLog)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.status.SHA256 = proc.SHA256
	s.mu.Unlock()
	client := proc.Client()
	callCtx, cancel := context.WithTimeout(ctx, s.settings.StartTimeout)
	defer cancel()
	if err := s.describe(callCtx, client); err != nil {
		proc.Stop()
		return nil, err
	}
	if err := s.configure(callCtx, client); err != nil {
		proc.Stop()
		return nil, err
	}
	s.mu.Lock()
	s.client, s.proc = client, proc
	s.timeouts = 0
	s.mu.Unlock()
	s.become(Running, "")
	info := s.Info()
	s.log.Info("plugin started", "version", info.GetVersion(), "api_version", info.GetApiVersion(), "pid", proc.PID())
	return proc, nil
}

// describe asks Info and checks what the plugin says about itself.
func (s *Supervisor) describe(ctx context.Context, client pluginv1.PluginServiceClient) error {
	info, err := client.Info(ctx, &pluginv1.InfoRequest{}, maxStartAnswer)
	if err != nil {
		return fmt.Errorf("Info: %w", tooLarge(err))
	}
	if major, _, _ := strings.Cut(info.GetApiVersion(), "."); major != strings.Split(transport.APIVersion, ".")[0] {
		return &launch.ProtocolError{Plugin: s.plugin.Name, Reason: fmt.Sprintf("its Info reports api_version %q", info.GetApiVersion())}
	}
	by := guard.SelectedBy(info.GetMetrics(), s.settings.MetricPrefix)
	s.mu.Lock()
	s.status.Info = info
	s.selectedBy = by
	s.mu.Unlock()
	if info.GetName() != s.plugin.Name {
		s.log.Warn("plugin reports another name than its file name", "reported", info.GetName())
	}
	s.warnDrift(info.GetSandboxHints())
	return nil
}

// SelectedBy returns, for the families of the running plugin's catalogue
// that further names select, those names, all as exposed: what the merge
// passes to the allowlist (guard.Input.SelectedBy). Read only.
func (s *Supervisor) SelectedBy() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.selectedBy
}

// warnDrift warns, once per supervisor, when the plugin says it needs what
// its manifest does not grant: inside the sandbox it would fail there, in
// ways that are hard to trace back to the manifest.
func (s *Supervisor) warnDrift(h *pluginv1.SandboxHints) {
	if s.driftWarned || s.settings.Manifest == nil {
		return
	}
	missing := s.settings.Manifest.Ungranted(h.GetCapabilities(), manifest.Paths{
		ReadOnly: h.GetReadOnlyPaths(), ReadWrite: h.GetReadWritePaths(), Devices: h.GetDevices(),
	})
	if len(missing) == 0 {
		return
	}
	s.driftWarned = true
	manifestFile := s.plugin.Manifest
	if manifestFile == "" {
		manifestFile = "none (write " + s.plugin.Path + ".yaml)"
	}
	s.log.Warn("plugin's sandbox hints ask for what its manifest does not grant; in the sandbox it will be denied (grant it in the manifest or plugins."+s.plugin.Name+".manifest, or fix the plugin's hints)",
		"ungranted", strings.Join(missing, ", "), "manifest", manifestFile)
}

// configure sends the settings. INVALID_ARGUMENT is the plugin rejecting
// them (a rejectedError); its warnings are logged, once per start.
func (s *Supervisor) configure(ctx context.Context, client pluginv1.PluginServiceClient) error {
	resp, err := client.Configure(ctx, s.settings.ConfigureRequest(), maxStartAnswer)
	if status.Code(err) == codes.InvalidArgument {
		return &rejectedError{message: status.Convert(err).Message()}
	}
	if err != nil {
		return fmt.Errorf("Configure: %w", tooLarge(err))
	}
	loc := s.settings.ConfigLocation
	logged, bytes := 0, 0
	for _, w := range resp.GetWarnings() {
		w = truncateWarning(w)
		if logged >= maxWarnings || bytes+len(w) > maxWarningBytes {
			s.warningsDropped.Add(1)
			continue
		}
		logged, bytes = logged+1, bytes+len(w)
		s.log.Warn("plugin warns about its configuration", "warning", w, "file", loc.File, "key", loc.Key, "line", loc.Line)
	}
	if n := len(resp.GetWarnings()) - logged; n > 0 {
		s.log.Warn("plugin sent more configuration warnings than the host logs; the rest are counted in plexporter_plugin_warnings_dropped_total", "dropped", n, "logged", logged, "file", loc.File, "key", loc.Key)
	}
	return nil
}

// The Configure warnings of one start the host logs: a plugin answering
// 100,000 warnings wrote 27 MB of log per start, again at every restart.
// A longer warning is cut at maxWarningLen and marked.
const (
	maxWarnings     = 32
	maxWarningBytes = 16 << 10
	maxWarningLen   = 1 << 10
)

func truncateWarning(w string) string {
	if len(w) <= maxWarningLen {
		return w
	}
	e, _ := wire.TruncateError(&pluginv1.CollectError{Message: w}, maxWarningLen)
	return e.GetMessage()
}

var errNotRunning = errors.New("plugin is not running")

// Collect returns the plugin's samples. Concurrent callers share one
// in-flight Collect; each waits at most until its own ctx ends. The Collect
// itself runs with the plugin's timeout, not the caller's, so a scraper
// that gives up does not cancel the collection for the others.
func (s *Supervisor) Collect(ctx context.Context) *Collection {
	s.mu.Lock()
	client := s.client
	s.mu.Unlock()
	if client == nil {
		return &Collection{Err: errNotRunning}
	}
	began := time.Now()
	ch := s.flight.DoChan("collect", func() (any, error) { return s.collect(client), nil })
	select {
	case r := <-ch:
		return r.Val.(*Collection)
	case <-ctx.Done():
		return &Collection{Err: fmt.Errorf("scrape ended before the plugin answered: %w", ctx.Err()), Duration: time.Since(began)}
	}
}

// hungAfter consecutive timed-out collects get a plugin restarted: its
// collect is stuck (the SDK admits one at a time), so it would time out
// forever while looking up.
const hungAfter = 3

func (s *Supervisor) collect(client pluginv1.PluginServiceClient) *Collection {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.settings.Timeout)
	defer cancel()
	res := &Collection{}
	stream, err := client.Collect(ctx, &pluginv1.CollectRequest{}, wire.MaxMessage)
	if err == nil {
		// Drain stops at the plugin's limits; the deferred cancel then ends
		// the RPC, which stops the plugin too.
		d := wire.DrainCounted(stream, wire.LimitsFor(s.settings.MaxSeries))
		res.Batches, res.Errors, res.ErrorsDropped, err = d.Batches, d.Errors, d.ErrorsDropped, d.Err
	}
	res.Err = err
	res.Duration = time.Since(began)
	s.noteCollect(res)
	s.noteTimeout(err != nil && (ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded))
	return res
}

// noteTimeout counts consecutive timed-out collects and kills a plugin
// that keeps timing out; the supervision loop restarts it.
func (s *Supervisor) noteTimeout(timedOut bool) {
	s.mu.Lock()
	if !timedOut {
		s.timeouts = 0
		s.mu.Unlock()
		return
	}
	s.timeouts++
	n, proc := s.timeouts, s.proc
	if n >= hungAfter {
		s.timeouts = 0
	}
	s.mu.Unlock()
	if n >= hungAfter && proc != nil {
		s.log.Error("plugin timed out on consecutive collects; restarting it", "timeouts", n, "timeout", s.settings.Timeout)
		proc.Kill()
	}
}

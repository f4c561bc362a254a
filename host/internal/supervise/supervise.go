// Package supervise runs one plugin process: start through go-plugin,
// Info and Configure, coalesced Collect calls, crash detection and restart
// with exponential backoff, and stop (the whole process group).
package supervise

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/pluginlog"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/transport"
)

// Settings for one plugin.
type Settings struct {
	Timeout      time.Duration // per Collect
	StartTimeout time.Duration // process start to handshake, Info and Configure
	MetricPrefix string
	Config       *structpb.Struct
	Enabled      []string
	Disabled     []string
	Paths        *pluginv1.Paths
	LogLevel     hclog.Level
	Env          []string // NAME=value pairs passed to the plugin
	SHA256       string   // pin from the manifest; "" for none
	MaxSeries    int
	// Sandbox confines the plugin (nil: it runs as the host's user, unconfined).
	Sandbox *sandbox.Spec

	// Restart policy: the delay starts at MinBackoff, doubles to MaxBackoff,
	// and resets once a run lasted HealthyAfter.
	MinBackoff, MaxBackoff, HealthyAfter time.Duration
}

func (s Settings) withDefaults() Settings {
	if s.MinBackoff == 0 {
		s.MinBackoff = time.Second
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = time.Minute
	}
	if s.HealthyAfter == 0 {
		s.HealthyAfter = 5 * time.Minute
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
	return reflect.DeepEqual(s, o)
}

// States of a plugin.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateBackoff  = "backoff"
	StateStopped  = "stopped"
)

// Status is a snapshot for self-metrics, /ready and `plexporter plugins`.
type Status struct {
	Name, Path, SHA256 string
	State, LastError   string
	Up                 bool
	Restarts           int
	Info               *pluginv1.InfoResponse
	Started            bool // the first start attempt is over (ok or not)
	Sandboxed          bool
}

// Collection is one Collect's result. Batches received before an error are kept.
type Collection struct {
	Batches  []*pluginv1.Batch
	Errors   []*pluginv1.CollectError
	Err      error
	Duration time.Duration
}

// Supervisor owns one plugin process.
type Supervisor struct {
	plugin   discover.Plugin
	settings Settings
	log      *slog.Logger

	mu     sync.Mutex
	status Status
	client pluginv1.PluginServiceClient
	gp     *plugin.Client
	proc   *processRunner

	timeouts  int // consecutive timed-out collects
	first     chan struct{}
	firstOnce sync.Once
	flight    singleflight.Group
	cancel    context.CancelFunc
	done      chan struct{}
}

// New returns a supervisor; Start runs it.
func New(p discover.Plugin, s Settings, log *slog.Logger) *Supervisor {
	s = s.withDefaults()
	return &Supervisor{
		plugin:   p,
		settings: s,
		log:      log.With("plugin", p.Name),
		status:   Status{Name: p.Name, Path: p.Path, State: StateStarting, Sandboxed: s.Sandbox != nil},
		first:    make(chan struct{}),
		done:     make(chan struct{}),
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

// Stop kills the plugin (its whole process group) and waits for the loop.
func (s *Supervisor) Stop() {
	s.cancel()
	<-s.done
}

// FirstAttempt is closed once the first start has succeeded or failed.
func (s *Supervisor) FirstAttempt() <-chan struct{} { return s.first }

// Status returns a snapshot.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Supervisor) loop(ctx context.Context) {
	defer close(s.done)
	backoff := s.settings.MinBackoff
	for {
		began := time.Now()
		err := s.start(ctx)
		s.firstOnce.Do(func() {
			s.mu.Lock()
			s.status.Started = true
			s.mu.Unlock()
			close(s.first)
		})
		if err == nil {
			select {
			case <-ctx.Done():
				s.kill(StateStopped, "")
				return
			case <-s.proc.exited:
				err = fmt.Errorf("plugin exited: %v", exitText(s.proc.waitErr))
			}
			if time.Since(began) >= s.settings.HealthyAfter {
				backoff = s.settings.MinBackoff
			}
		}
		if ctx.Err() != nil {
			s.kill(StateStopped, "")
			return
		}
		s.log.Error("plugin down; restarting", "err", err, "backoff", backoff)
		s.kill(StateBackoff, err.Error())
		select {
		case <-ctx.Done():
			s.kill(StateStopped, "")
			return
		case <-time.After(backoff):
		}
		s.mu.Lock()
		s.status.Restarts++
		s.status.State = StateStarting
		s.mu.Unlock()
		backoff = min(backoff*2, s.settings.MaxBackoff)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// start launches the process and runs Info and Configure.
func (s *Supervisor) start(ctx context.Context) error {
	sum, err := FileSHA256(s.plugin.Target)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.status.SHA256 = sum
	s.mu.Unlock()
	if pin := s.settings.SHA256; pin != "" && !strings.EqualFold(pin, sum) {
		return fmt.Errorf("refusing %s: sha256 %s does not match the manifest's pin %s", s.plugin.Target, sum, pin)
	}

	// The plugin gets a clean environment: go-plugin's handshake variables,
	// PATH, its log level and what its manifest allows, nothing else.
	env := append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"PLEXPORTER_PLUGIN_LOG_LEVEL=" + s.settings.LogLevel.String()}, s.settings.Env...)
	var proc *processRunner
	gp := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  transport.Handshake,
		VersionedPlugins: transport.PluginSet(nil),
		// go-plugin hands RunnerFunc an empty command carrying its handshake
		// environment; we run the plugin binary with it.
		RunnerFunc: func(_ hclog.Logger, spec *exec.Cmd, socketDir string) (runner.Runner, error) {
			cmd, err := s.command(env, spec.Env, socketDir)
			if err != nil {
				return nil, err
			}
			proc, err = newProcessRunner(cmd)
			return proc, err
		},
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     s.settings.StartTimeout,
		Logger:           pluginlog.New(s.log, s.settings.LogLevel),
		Stderr:           io.Discard, // lines are re-logged through Logger
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
	})
	s.mu.Lock()
	s.gp = gp
	s.mu.Unlock()
	rpc, err := gp.Client()
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("start %s: %w", s.plugin.Target, err)
	}
	raw, err := rpc.Dispense(transport.PluginName)
	if err != nil {
		return fmt.Errorf("dispense: %w", err)
	}
	client := raw.(pluginv1.PluginServiceClient)

	callCtx, cancel := context.WithTimeout(ctx, s.settings.StartTimeout)
	defer cancel()
	info, err := client.Info(callCtx, &pluginv1.InfoRequest{})
	if err != nil {
		return fmt.Errorf("Info: %w", err)
	}
	if major, _, _ := strings.Cut(info.GetApiVersion(), "."); major != strings.Split(transport.APIVersion, ".")[0] {
		return fmt.Errorf("plugin speaks API version %q, the host %s", info.GetApiVersion(), transport.APIVersion)
	}
	if info.GetName() != s.plugin.Name {
		s.log.Warn("plugin reports another name than its file name", "reported", info.GetName())
	}
	_, err = client.Configure(callCtx, &pluginv1.ConfigureRequest{
		Config:          s.settings.Config,
		EnabledMetrics:  s.settings.Enabled,
		DisabledMetrics: s.settings.Disabled,
		MetricPrefix:    s.settings.MetricPrefix,
		Paths:           s.settings.Paths,
	})
	if err != nil {
		return fmt.Errorf("Configure: %w", err)
	}
	s.mu.Lock()
	s.client = client
	s.status.Info = info
	s.status.Up = true
	s.status.State = StateRunning
	s.status.LastError = ""
	s.mu.Unlock()
	s.log.Info("plugin started", "version", info.GetVersion(), "api_version", info.GetApiVersion(), "pid", proc.ID())
	return nil
}

// command builds the plugin's command line: the plugin binary itself, or
// the host re-executed as the sandbox launcher that confines itself and
// then execs the plugin.
func (s *Supervisor) command(env, handshakeEnv []string, socketDir string) (*exec.Cmd, error) {
	env = append(env, handshakeEnv...)
	if s.settings.Sandbox == nil {
		cmd := exec.Command(s.plugin.Target)
		cmd.Args[0] = s.plugin.Path // the name it was installed under
		cmd.Env = env
		return cmd, nil
	}
	spec := *s.settings.Sandbox
	spec.SocketDir = socketDir
	// go-plugin made the socket directory for the host's user; the plugin
	// creates its socket there, the host (root) can still connect.
	if err := os.Chown(socketDir, spec.UID, spec.GID); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the host binary for the sandbox launcher: %w", err)
	}
	encoded, err := spec.Encode()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, sandbox.LaunchArg)
	cmd.Env = append(env, encoded)
	return cmd, nil
}

// kill stops the process group and records the new state.
func (s *Supervisor) kill(state, lastErr string) {
	s.mu.Lock()
	gp, proc := s.gp, s.proc
	s.client, s.gp = nil, nil
	s.status.Up = false
	s.status.State = state
	if lastErr != "" {
		s.status.LastError = lastErr
	}
	s.mu.Unlock()
	// Graceful first: go-plugin closes the connection, the SDK calls the
	// plugin's Close and exits; after 2 s go-plugin kills it. Then the
	// group kill makes sure no child the plugin started survives either way.
	if gp != nil {
		gp.Kill()
	}
	if proc != nil {
		_ = proc.Kill(context.Background())
	}
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
	defer func() {
		res.Duration = time.Since(began)
		s.noteTimeout(res.Err != nil && (ctx.Err() != nil || status.Code(res.Err) == codes.DeadlineExceeded))
	}()
	stream, err := client.Collect(ctx, &pluginv1.CollectRequest{})
	if err != nil {
		res.Err = err
		return res
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			res.Err = err
			return res
		}
		if msg.Batch != nil {
			res.Batches = append(res.Batches, msg.Batch)
		}
		res.Errors = append(res.Errors, msg.Errors...)
	}
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
		_ = proc.Kill(context.Background())
	}
}

// FileSHA256 returns the hex SHA-256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

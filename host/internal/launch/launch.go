// Package launch starts one plugin process and connects to it: it checks
// the binary against its manifest's sha256 pin, builds the plugin's whole
// environment and its command line (the binary itself, or the host
// re-executed as the sandbox launcher), hands go-plugin's socket directory
// to the plugin's user, and runs the process through a go-plugin runner that
// ties the plugin's life to the host's (process group, lifeline pipe,
// parent-death signal).
//
// Everything about *how* a plugin process comes to exist is here; what the
// host then asks it (Info, Configure, Collect) and when it restarts it is
// host/internal/supervise.
package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/pluginlog"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/transport"
)

// Options say how to start a plugin.
type Options struct {
	// SHA256 is the manifest's pin ("" for none): the binary is hashed once
	// per start, just before it is run, and refused if it differs.
	SHA256 string
	// PassEnv names the host's environment variables the manifest lets
	// through; those set are passed with their values, nothing else of the
	// host's environment is.
	PassEnv []string
	// LogLevel is the host's; the plugin does not format lines below it.
	LogLevel hclog.Level
	// Sandbox confines the plugin; nil runs it as the host's user, unconfined.
	Sandbox *sandbox.Spec
	// StartTimeout bounds process start and go-plugin's handshake.
	StartTimeout time.Duration
	// SocketParent is where go-plugin makes this start's socket directory:
	// the host instance's runtime directory (RuntimeDir); "" for $TMPDIR.
	SocketParent string
	// LogBudget bounds what the plugin's stderr costs the host (nil:
	// DefaultLogBudget); lines it drops are counted in LogDropped.
	LogBudget  *LogBudget
	LogDropped *atomic.Uint64
	// OnLogDrop, when set, is called at every dropped log line, after it
	// is counted; it must not block.
	OnLogDrop func()
	// StdioBudget bounds what go-plugin's own streams from the plugin cost
	// the host (nil: DefaultStdioBudget).
	StdioBudget *StdioBudget
}

// PinError is Start's answer for a binary that is not the one its manifest
// pins. Restarting does not help: only another binary or another pin does.
type PinError struct {
	Path, SHA256, Pin string
}

func (e *PinError) Error() string {
	return fmt.Sprintf("sha256 of %s is %s, the manifest pins %s: refusing a binary that is not the one pinned (install the pinned build or update the manifest's sha256)", e.Path, e.SHA256, e.Pin)
}

// Process is a started plugin, handshake done.
type Process struct {
	// SHA256 of the binary that was started.
	SHA256 string
	client pluginv1.PluginServiceClient
	gp     *plugin.Client
	run    *processRunner
}

// Start hashes and checks the binary, starts it and completes go-plugin's
// handshake. log is the host's logger, not tagged with the plugin: every
// line about the process, go-plugin's and the plugin's own, is tagged
// plugin=<name> once, by pluginlog.
//
// The binary is opened once: what is hashed, checked against the pin and
// executed is that one open file, never the path again, so a file renamed
// over the plugin between the check and the exec is not what runs.
func Start(p discover.Plugin, o Options, log *slog.Logger) (*Process, error) {
	bin, sum, err := openBinary(p.Target)
	if err != nil {
		return nil, err
	}
	// The child has its own descriptor once started; the host's is closed
	// when the start is over, whatever its outcome.
	defer bin.Close()
	if o.SHA256 != "" && !strings.EqualFold(o.SHA256, sum) {
		return nil, &PinError{Path: p.Target, SHA256: sum, Pin: o.SHA256}
	}
	var run *processRunner
	stdio := DefaultStdioBudget
	if o.StdioBudget != nil {
		stdio = *o.StdioBudget
	}
	gp := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  transport.Handshake,
		VersionedPlugins: transport.PluginSet(nil),
		// go-plugin hands RunnerFunc an empty command that carries only its
		// handshake environment (SkipHostEnv), and a socket directory it made.
		RunnerFunc: func(_ hclog.Logger, handshake *exec.Cmd, socketDir string) (runner.Runner, error) {
			// Bounded before the plugin exists (socketfs.go); unmounted by
			// the runner once the process has exited.
			uid, gid := os.Geteuid(), os.Getegid()
			if o.Sandbox != nil {
				uid, gid = o.Sandbox.UID, o.Sandbox.GID
			}
			unmount := boundSocketDir(socketDir, uid, gid, log)
			release := func() {
				if unmount != nil {
					unmount()
				}
			}
			cmd, err := command(p, o, bin, environment(o, os.LookupEnv, handshake.Env), socketDir)
			if err != nil {
				release()
				return nil, err
			}
			run, err = newProcessRunner(cmd, p.Path, p.Name, socketDir, log, func(stderr io.ReadCloser, crash *crashNote) io.ReadCloser {
				budget := DefaultLogBudget
				if o.LogBudget != nil {
					budget = *o.LogBudget
				}
				budget.Dropped, budget.OnDrop = o.LogDropped, o.OnLogDrop
				return relayLogs(stderr, pluginlog.NewRelay(log, p.Name, o.LogLevel), budget, log, p.Name, crash)
			})
			if err != nil {
				release()
				return nil, err
			}
			run.release = release
			if o.Sandbox != nil {
				run.target, run.sandboxUID, run.sandboxGID = p.Target, o.Sandbox.UID, o.Sandbox.GID
			}
			return run, nil
		},
		UnixSocketConfig: &plugin.UnixSocketConfig{TempDir: o.SocketParent},
		// go-plugin's own dialer connects to whatever path the handshake
		// named; ours only to the socket the runner checked (runner.go).
		GRPCDialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return run.dial(ctx)
		}), grpc.WithChainStreamInterceptor(budgetGoPluginStreams(stdio))},
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     o.StartTimeout,
		Logger:           pluginlog.New(log, p.Name, p.Path, o.LogLevel),
		Stderr:           io.Discard, // the runner relays the plugin's lines itself
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
	})
	proc := &Process{SHA256: sum, gp: gp}
	rpc, err := gp.Client()
	proc.run = run
	if err != nil {
		proc.Stop()
		if incompatibleHandshake(err) {
			err = &ProtocolError{Plugin: p.Name, Reason: err.Error()}
		} else if why := run.notExecutable(); why != "" {
			err = errors.New(why)
		}
		return nil, fmt.Errorf("start %s: %w", p.Target, err)
	}
	raw, err := rpc.Dispense(transport.PluginName)
	if err != nil {
		proc.Stop()
		return nil, fmt.Errorf("dispense: %w", err)
	}
	proc.client = raw.(pluginv1.PluginServiceClient)
	return proc, nil
}

// Client is the plugin's gRPC service.
func (p *Process) Client() pluginv1.PluginServiceClient { return p.client }

// PID of the plugin (of the sandbox launcher that became it).
func (p *Process) PID() int { return p.run.pid() }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.run.exited }

// ExitError is the process's exit status once Exited is closed (nil for
// 0): the signal that killed it by name, and for a crash the reason its
// stderr gave (a Go panic's first line, the runtime's fatal signal), which
// go-plugin would log at DEBUG only. It waits a moment (stderrGrace) for
// the rest of stderr: the runtime writes the reason first, long before it
// exits, so it is normally read by then.
func (p *Process) ExitError() error {
	select {
	case <-p.run.crash.done:
	case <-time.After(stderrGrace):
	}
	return exitError(p.run.exitErr, p.run.crash)
}

const stderrGrace = 100 * time.Millisecond

// Stop ends a plugin the host no longer wants: go-plugin closes the
// connection, the SDK calls the plugin's Close and exits, and after 2 s at
// most the whole process group is killed, so no child of the plugin
// survives either way. The exit is logged as the host's doing, not as a
// failure. Stop is safe after the process exited, and more than once.
func (p *Process) Stop() {
	if p.run != nil {
		p.run.expectExit()
	}
	p.gp.Kill()
	if p.run != nil {
		_ = p.run.Kill(context.Background())
	}
}

// Kill ends the plugin's process group now, without the graceful part (a
// plugin whose collect is stuck would not answer it).
func (p *Process) Kill() {
	if p.run != nil {
		_ = p.run.Kill(context.Background())
	}
}

// searchPath is the plugin's PATH: the host's own is not passed on.
const searchPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// environment is the plugin's whole environment. Nothing of the host's own
// reaches the plugin except what its manifest lets through (o.PassEnv,
// looked up with lookup); later entries win, so the host's own variables
// come after the manifest's, and go-plugin's handshake last.
func environment(o Options, lookup func(string) (string, bool), handshake []string) []string {
	env := []string{"PATH=" + searchPath}
	for _, name := range o.PassEnv {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env,
		transport.LogLevelEnv+"="+o.LogLevel.String(),
		transport.LifelineEnv+"="+strconv.Itoa(lifelineFD),
	)
	if o.Sandbox != nil && o.Sandbox.MemoryBytes > 0 {
		// Without a cgroup the limit is an rlimit on writable mappings,
		// which a Go runtime hits as a fatal error; GOMEMLIMIT makes a Go
		// plugin collect garbage before that.
		env = append(env, "GOMEMLIMIT="+strconv.FormatInt(o.Sandbox.MemoryBytes, 10))
	}
	return append(env, handshake...)
}

// binaryFD is where the plugin's process (or its sandbox launcher) finds the
// plugin binary the host opened and hashed: the second of exec.Cmd.ExtraFiles
// (runner.go puts the lifeline first). It is executed through
// /proc/self/fd/<binaryFD>, the very file the host hashed whatever the path
// names by then; the descriptor stays open in the plugin (read-only, its
// own binary), which an interpreter needs for a script.
const binaryFD = lifelineFD + 1

// command is the plugin's command line: the plugin binary itself, or the
// host re-executed as the sandbox launcher, which confines itself and then
// execs the plugin with the same environment. Either way what is executed
// is bin, the file the host hashed (binaryFD), not p.Target's path again.
func command(p discover.Plugin, o Options, bin *os.File, env []string, socketDir string) (*exec.Cmd, error) {
	if o.Sandbox == nil {
		cmd := exec.Command("/proc/self/fd/" + strconv.Itoa(binaryFD))
		cmd.Args[0] = p.Path // the name it was installed under
		cmd.Env = env
		cmd.ExtraFiles = []*os.File{bin}
		return cmd, nil
	}
	spec := *o.Sandbox
	spec.SocketDir = socketDir
	spec.BinaryFD = binaryFD
	// go-plugin made the socket directory for the host's user (mode 0700);
	// the plugin creates its socket there as its own user, and the host
	// (root) can still connect to it.
	if err := os.Chown(socketDir, spec.UID, spec.GID); err != nil {
		return nil, fmt.Errorf("hand the socket directory to uid %d: %w", spec.UID, err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the host binary for the sandbox launcher: %w", err)
	}
	args, err := spec.LauncherArgs()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{bin}
	cmd.SysProcAttr = spec.SysProcAttr() // its PID namespace; the runner adds its own
	return cmd, nil
}

// openBinary opens a plugin binary for hashing and executing, and returns
// it with its hex SHA-256. The descriptor is positioned at the start again:
// exec reads the file, not the offset, but a later hash must see it whole.
func openBinary(path string) (*os.File, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	var sum string
	if err == nil {
		sum, err = hashFile(f)
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, sum, nil
}

// FileSHA256 returns the hex SHA-256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashFile(f)
}

func hashFile(f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", fmt.Errorf("hash %s: %w", f.Name(), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ProtocolError is a plugin that speaks another protocol than the host:
// another go-plugin core protocol, another application protocol (a major
// of plexporter.plugin), net/rpc instead of gRPC, or an api_version whose
// major is not the host's. Restarting the same binary cannot fix it, so the
// supervisor refuses the plugin until its binary changes.
type ProtocolError struct {
	Plugin string
	Reason string // what does not match, in go-plugin's or the host's words
}

func (e *ProtocolError) Error() string {
	major, _, _ := strings.Cut(transport.APIVersion, ".")
	return fmt.Sprintf("plugin %s speaks another protocol than this host (%s); this host speaks plexporter.plugin.v%d over gRPC, api_version %s.x: install a build of the plugin for it, or a host that speaks the plugin's protocol",
		e.Plugin, firstLine(e.Reason), transport.ProtocolVersion, major)
}

// incompatibleHandshake tells go-plugin's version-mismatch errors from the
// others. go-plugin has no typed errors for them, so its messages are
// matched (the test with a plugin offering protocol 2 pins them).
func incompatibleHandshake(err error) bool {
	m := strings.ToLower(err.Error())
	for _, prefix := range []string{
		"incompatible core api version",
		"incompatible api version",
		"error parsing core protocol version",
		"error parsing protocol version",
		"unsupported plugin protocol",
	} {
		if strings.Contains(m, prefix) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

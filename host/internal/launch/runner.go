package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-plugin/runner"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk/transport"
)

// lifelineFD is where the plugin finds the read end of the lifeline pipe:
// the first of exec.Cmd.ExtraFiles is fd 3 in the child. environment tells
// the plugin through transport.LifelineEnv.
const lifelineFD = 3

// processRunner is go-plugin's runner for a plugin process, with the three
// things the stock runner lacks:
//   - the plugin leads its own process group, and Kill takes the whole group,
//     so children a plugin spawned die with it;
//   - a lifeline pipe (lifelineFD) whose write end only the host holds: when
//     the host dies, however it dies, the plugin reads EOF and exits (the SDK
//     does it);
//   - the parent-death signal, set from one OS thread that lives as long as
//     the host (see onSpawnThread).
//
// It also tells go-plugin whether an exit was the host's doing: Wait reports
// a stop the host asked for as clean, so go-plugin logs it at INFO, and only
// a plugin that died on its own is logged as an error.
type processRunner struct {
	cmd            *exec.Cmd
	name           string // the plugin's path, which go-plugin logs
	plugin         string // the plugin's name, for errors
	socketDir      string // the directory go-plugin made for this start's socket
	socket         string // the socket the handshake named, once checked (PluginToHost)
	stdout, stderr io.ReadCloser
	lifeline       *os.File // host's write end
	exited         chan struct{}
	waitOnce       sync.Once
	exitErr        error // the process's own exit status
	crash          *crashNote
	stdoutCut      atomic.Int64 // stdout lines cut to stdoutLineLimit
	target         string       // the binary, for Diagnose
	sandboxUID     int          // the sandbox user's uid and gid; -1 unsandboxed
	sandboxGID     int
	expected       atomic.Bool
	closeLifeline  sync.Once
	// release unmounts the socket directory's tmpfs (socketfs.go) once the
	// process has exited, or its start failed; nil: nothing to undo.
	release func()
}

var _ runner.Runner = (*processRunner)(nil)

func newProcessRunner(cmd *exec.Cmd, name, plugin, socketDir string, log *slog.Logger, logs func(io.ReadCloser, *crashNote) io.ReadCloser) (*processRunner, error) {
	r := &processRunner{cmd: cmd, name: name, plugin: plugin, socketDir: socketDir, exited: make(chan struct{}), crash: newCrashNote(), sandboxUID: -1, sandboxGID: -1}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r.stdout = boundStdout(stdout, &r.stdoutCut, func() {
		log.Warn("plugin wrote a line longer than the host reads to stdout; such lines are cut and the rest dropped (stdout carries only the handshake: a plugin logs to stderr)",
			"plugin", plugin, "limit_bytes", stdoutLineLimit)
	})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	r.stderr = logs(stderr, r.crash)
	return r, nil
}

func (r *processRunner) Start(context.Context) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("lifeline pipe: %w", err)
	}
	// lifelineFD in the child, then what command passed (binaryFD).
	r.cmd.ExtraFiles = append([]*os.File{pr}, r.cmd.ExtraFiles...)
	// Added to what command set (a sandboxed plugin's PID namespace).
	if r.cmd.SysProcAttr == nil {
		r.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	r.cmd.SysProcAttr.Setpgid = true
	r.cmd.SysProcAttr.Pdeathsig = transport.ParentDeathSignal
	err = onSpawnThread(r.cmd.Start)
	pr.Close()
	if err != nil {
		pw.Close()
		r.unmount() // go-plugin calls neither Wait nor Kill for a process that never started
		return err
	}
	r.lifeline = pw
	return nil
}

// Wait waits for the process. Its error is what go-plugin logs: nil for an
// exit the host asked for (the process's own status is in exitErr).
func (r *processRunner) Wait(context.Context) error {
	r.waitOnce.Do(func() {
		r.exitErr = r.cmd.Wait()
		r.unmount()
		close(r.exited)
	})
	<-r.exited
	if r.expected.Load() {
		return nil
	}
	return r.exitErr
}

func (r *processRunner) unmount() {
	if r.release != nil {
		r.release()
	}
}

// expectExit records that the host is about to end the process.
func (r *processRunner) expectExit() { r.expected.Store(true) }

// Kill ends the plugin's whole process group. go-plugin calls it too, only
// when the host stops the plugin or its start failed: either way the exit
// is the host's doing.
func (r *processRunner) Kill(context.Context) error {
	r.expectExit()
	if r.cmd.Process == nil {
		r.unmount() // never started: no Wait to do it
		return nil
	}
	r.closeLifeline.Do(func() {
		if r.lifeline != nil {
			r.lifeline.Close()
		}
	})
	err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (r *processRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr is what go-plugin reads as the plugin's log stream: nothing, until
// the plugin's stderr ends; the host reads and logs its lines itself
// (relayLogs).
func (r *processRunner) Stderr() io.ReadCloser { return r.stderr }
func (r *processRunner) Name() string          { return r.name }
func (r *processRunner) Diagnose(context.Context) string {
	if why := r.notExecutable(); why != "" {
		return why
	}
	return "check that the file is a plexporter plugin built for this architecture"
}

// notExecutable says why the sandbox user cannot execute the plugin's
// binary, or "" (unsandboxed, or the mode allows it).
func (r *processRunner) notExecutable() string {
	if r == nil || r.sandboxUID < 0 || r.target == "" {
		return ""
	}
	return notExecutableBy(r.target, r.sandboxUID, r.sandboxGID)
}

func (r *processRunner) ID() string {
	if p := r.pid(); p != 0 {
		return strconv.Itoa(p)
	}
	return ""
}

func (r *processRunner) pid() int {
	if r == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// PluginToHost checks the address the plugin's handshake line names before
// go-plugin dials it: the plugin chooses that line, so without the check a
// plugin could make the host connect, as root, to any TCP address or unix
// socket on the machine. Only a unix socket directly inside the directory
// the host made for this start is accepted; dial connects to exactly that
// socket.
func (r *processRunner) PluginToHost(network, addr string) (string, string, error) {
	refuse := func(why string) (string, string, error) {
		return "", "", &AddressError{Plugin: r.plugin, Network: network, Address: addr, Reason: why, SocketDir: r.socketDir}
	}
	if network != "unix" {
		return refuse("not a unix socket")
	}
	if r.socketDir == "" || !filepath.IsAbs(addr) || filepath.Clean(addr) != addr || filepath.Dir(addr) != filepath.Clean(r.socketDir) {
		return refuse("not directly in the plugin's socket directory")
	}
	fi, err := os.Lstat(addr)
	if err != nil {
		return refuse(err.Error())
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return refuse("a " + fileType(fi.Mode()) + ", not a socket")
	}
	r.socket = addr
	return network, addr, nil
}

// AddressError is Start's answer for a plugin whose handshake names an
// address the host does not dial. The plugin chose it; restarting it would
// only be refused again.
type AddressError struct {
	Plugin, Network, Address, Reason string
	SocketDir                        string // the directory the host made for the plugin
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("plugin %s: refusing to dial %s address %q from its handshake: %s; a plugin may only listen on a unix socket in %s, the directory the host made for it (PLUGIN_UNIX_SOCKET_DIR)", e.Plugin, e.Network, e.Address, e.Reason, e.SocketDir)
}

func (r *processRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }

// dial connects to the socket PluginToHost accepted, and to no other file
// put in its place since: the plugin owns its socket directory and could
// swap the socket for a symlink to another one between the check and the
// connect. The socket is opened without following links (O_PATH|O_NOFOLLOW),
// checked, and connected to through the descriptor's /proc/self/fd name,
// which names that very inode.
func (r *processRunner) dial(ctx context.Context) (net.Conn, error) {
	if r == nil || r.socket == "" {
		return nil, fmt.Errorf("plugin %s: no checked socket to dial", r.pluginName())
	}
	fd, err := unix.Open(r.socket, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: open socket %s: %w", r.plugin, r.socket, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("plugin %s: stat socket %s: %w", r.plugin, r.socket, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("plugin %s: %s is no longer a socket: refusing to dial it", r.plugin, r.socket)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}

func (r *processRunner) pluginName() string {
	if r == nil {
		return "?"
	}
	return r.plugin
}

func fileType(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeSymlink:
		return "symlink"
	case fs.ModeDir:
		return "directory"
	case 0:
		return "regular file"
	}
	return m.Type().String()
}

var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs fn on a goroutine locked to an OS thread that never
// exits. The kernel sends the parent-death signal when the *thread* that
// forked the child exits, and the Go runtime retires threads at will: forking
// every plugin from one thread that lives as long as the host makes the
// signal mean "the host died".
//
// The thread also runs at PluginNice, which every plugin it forks inherits
// (the sandbox launcher, then the plugin and its children): plugins are a
// lower CPU weight class than the host's own threads, so that the host's
// scrape path is scheduled first whatever the plugins do. A sandboxed
// plugin cannot undo it (lowering a nice value needs CAP_SYS_NICE).
func onSpawnThread(fn func() error) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			lowerSpawnPriority()
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	spawnCh <- func() { done <- fn() }
	return <-done
}

// PluginNice is the nice value plugins run at: weight 110 against the
// host's 1024 (nice 0), the tenth the plugins' cgroups are given among
// themselves (cgroup.go). Measured in alternating rounds
// (TestP95RoundsUnsandboxed, docs/security.md): a healthy plugin's scrape
// p95 beside an error flood and a log flood.
const PluginNice = 10

// lowerSpawnPriority raises the calling thread's nice value to PluginNice
// (never lowers it: a host started at a higher nice keeps its own). Raising
// one's own nice value needs no privilege.
func lowerSpawnPriority() {
	tid := unix.Gettid()
	if cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil && 20-cur >= PluginNice { // 20 - nice
		return
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, tid, PluginNice)
}

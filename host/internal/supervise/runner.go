package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/hashicorp/go-plugin/runner"

	"github.com/plexporter/plexporter/sdk/transport"
)

// processRunner is go-plugin's runner for a plugin process, with the three
// things the stock runner lacks:
//   - the plugin leads its own process group, and Kill takes the whole group,
//     so children a plugin spawned die with it;
//   - a lifeline pipe (fd 3) whose write end only the host holds: when the
//     host dies, however it dies, the plugin reads EOF and exits (sdk does it);
//   - Pdeathsig (SIGTERM), set from one OS thread that lives as long as the host, since
//     the kernel delivers it when the *thread* that forked the child exits.
type processRunner struct {
	cmd            *exec.Cmd
	stdout, stderr io.ReadCloser
	lifeline       *os.File // host's write end
	exited         chan struct{}
	waitOnce       sync.Once
	waitErr        error
}

var _ runner.Runner = (*processRunner)(nil)

func newProcessRunner(cmd *exec.Cmd) (*processRunner, error) {
	r := &processRunner{cmd: cmd, exited: make(chan struct{})}
	var err error
	if r.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if r.stderr, err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *processRunner) Start(context.Context) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("lifeline pipe: %w", err)
	}
	r.cmd.ExtraFiles = []*os.File{pr} // fd 3 in the child
	r.cmd.Env = append(r.cmd.Env, transport.LifelineEnv+"=3")
	// SIGTERM rather than SIGKILL: an SDK plugin answers it by killing its
	// whole process group, which a SIGKILL would not give it the chance to.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	err = onSpawnThread(r.cmd.Start)
	pr.Close()
	if err != nil {
		pw.Close()
		return err
	}
	r.lifeline = pw
	return nil
}

func (r *processRunner) Wait(context.Context) error {
	r.waitOnce.Do(func() {
		r.waitErr = r.cmd.Wait()
		close(r.exited)
	})
	<-r.exited
	return r.waitErr
}

// Kill ends the plugin's whole process group.
func (r *processRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	if r.lifeline != nil {
		r.lifeline.Close()
	}
	err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (r *processRunner) Stdout() io.ReadCloser { return r.stdout }
func (r *processRunner) Stderr() io.ReadCloser { return r.stderr }
func (r *processRunner) Name() string          { return r.cmd.Path }
func (r *processRunner) Diagnose(context.Context) string {
	return "check that the file is a plexporter plugin built for this architecture"
}

func (r *processRunner) ID() string {
	if r.cmd.Process == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}

func (r *processRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *processRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }

var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs fn on a goroutine locked to an OS thread that never
// exits, so Pdeathsig of the children it forks fires only when the host dies.
func onSpawnThread(fn func() error) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	spawnCh <- func() { done <- fn() }
	return <-done
}

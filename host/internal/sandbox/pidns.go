package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Every process a plugin starts must die with the plugin and with the host,
// including one that calls setsid(2) and double-forks: that escapes the
// process-group kill, the lifeline pipe and the parent-death signal alike.
// So a sandboxed plugin gets its own PID namespace (the host starts the
// launcher with CLONE_NEWPID, host/internal/launch): when the namespace's
// first process exits, the kernel SIGKILLs everything left in it.
//
// That first process is the launcher, staying on as a tiny init (runInit),
// not the plugin, because PID 1 receives only the signals it has a handler
// for (a C plugin would ignore the host's SIGTERM), and orphans re-parented
// to it stay zombies unless it reaps them, which no plugin does.
//
// /proc is not remounted: the plugin reads the host's procfs, where
// /proc/self is still itself (by its pid in the host's namespace), and the
// collectors' /proc paths mean what they meant before.

// lifelineFD is the launcher's and the plugin's read end of the host's
// lifeline pipe (host/internal/launch): the host holds the only write end.
const lifelineFD = 3

// hostGone reports whether the host's end of the lifeline is closed. Inside
// a PID namespace getppid() is 0 (the host is outside it), so the launcher
// cannot tell the host's death from its parent's pid.
func hostGone() bool {
	fds := []unix.PollFd{{Fd: lifelineFD, Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLIN|unix.POLLERR) != 0
}

// runInit is PID 1 of the plugin's namespace. It starts the launcher that
// confines itself and execs the plugin (ChildArg: the plugin's Landlock
// rules must be built by the plugin's own process, so that /proc/self in
// them is the plugin), confines itself, forwards termination signals to
// the plugin, reaps every orphan, and exits with the plugin's status. Its
// own parent-death signal is SIGKILL: the host's death ends the namespace.
func runInit(s *Spec, specJSON string) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	// The child launcher gets the same descriptors at the same numbers:
	// the lifeline and the binary the host hashed (-1: closed there).
	files := []uintptr{0, 1, 2}
	for _, fd := range []int{lifelineFD, s.BinaryFD} {
		if fd <= 0 {
			continue
		}
		for len(files) < fd {
			files = append(files, ^uintptr(0))
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			files = append(files, uintptr(fd))
		} else {
			files = append(files, ^uintptr(0))
		}
	}
	// /proc/self/exe, not os.Executable: it is this very binary even if the
	// host's file was replaced or removed by an upgrade since.
	pid, err := syscall.ForkExec("/proc/self/exe", []string{os.Args[0], ChildArg, specJSON}, &syscall.ProcAttr{
		Env: os.Environ(), Files: files, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		initFail(fmt.Errorf("start the plugin's launcher: %w", err))
	}
	if err := confineInit(s); err != nil {
		initFail(err) // the plugin dies with the namespace
	}
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			_ = syscall.Kill(pid, sig.(syscall.Signal))
			continue
		}
		for {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err != nil || wpid <= 0 {
				break
			}
			if wpid != pid {
				continue // an orphan: reaped, nothing else
			}
			if ws.Signaled() {
				os.Exit(128 + int(ws.Signal())) // as a shell reports it: PID 1 cannot kill itself
			}
			os.Exit(ws.ExitStatus())
		}
	}
}

func initFail(err error) {
	fmt.Fprintf(os.Stderr, "[ERROR] plexporter sandbox init: %v\n", err)
	os.Exit(126)
}

// confineInit leaves PID 1 no more than the plugin has, on every thread:
// the plugin's uid and gid, no capabilities, no_new_privs, a Landlock
// domain granting no path and no port, and the network filter of an empty
// grant. Its domain does not scope signals, so that it can forward them to
// the plugin (whose domain is not nested in its own); the plugin's domain
// does, so the plugin cannot signal PID 1.
func confineInit(s *Spec) error {
	if err := credentials(&Spec{UID: s.UID, GID: s.GID}); err != nil {
		return err
	}
	if _, err := cap.Prctlw(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	cfg := landlockConfig
	cfg.Scoped = llsyscall.ScopeAbstractUnixSocket
	if err := cfg.Restrict(); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := installFilter(manifest.Network{}, unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
		return err
	}
	// The credential change cleared the parent-death signal the host set.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if hostGone() {
		return fmt.Errorf("the host exited during launch")
	}
	return nil
}

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a process the harness started; every one is stopped on exit.
type proc struct {
	name    string
	cmd     *exec.Cmd
	url     string // http://127.0.0.1:port
	logPath string
	done    chan struct{}
	waitErr error
}

var (
	procsMu sync.Mutex
	procs   []*proc
)

// startProc runs bin with args, output to <workdir>/<name>.log. The
// environment is the harness's without PLEXPORTER_* variables (they would
// change the host's flags), plus env.
func (h *harness) startProc(name, addr, bin string, args []string, env []string) (*proc, error) {
	return h.start(name, addr, bin, args, env, false)
}

// startProcStdin is startProc with the child's stdin a pipe that only the
// harness holds: the child sees EOF when the harness exits, however it exits.
func (h *harness) startProcStdin(name, addr, bin string, args []string) (*proc, error) {
	return h.start(name, addr, bin, args, nil, true)
}

func (h *harness) start(name, addr, bin string, args []string, env []string, stdinPipe bool) (*proc, error) {
	logPath := filepath.Join(h.work, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLEXPORTER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	// Best effort if the harness is killed: SIGTERM lets a host stop its plugins.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if stdinPipe {
		w, err := cmd.StdinPipe()
		if err != nil {
			logf.Close()
			return nil, err
		}
		lifelines = append(lifelines, w) // never closed: the harness's exit closes it
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, url: "http://" + addr, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, nil
}

var lifelines []io.WriteCloser

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM (the host stops its plugins), then SIGKILL after 5 s.
func (p *proc) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
}

// logTail returns the last lines of the process's log, for error messages.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

func stopAll() {
	procsMu.Lock()
	ps := append([]*proc(nil), procs...)
	procsMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(p.stop)
	}
	wg.Wait()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitHTTP polls url every poll until it answers 200, the process exits or
// timeout passes.
func waitHTTP(p *proc, path string, poll, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: dialContext}}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited before %s answered: %v\n%s", p.name, path, p.waitErr, p.logTail())
		}
		resp, err := client.Get(p.url + path)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("%s: %s not 200 after %v\n%s", p.name, path, timeout, p.logTail())
}

// status returns a field of /proc/<pid>/status in bytes (VmRSS, VmHWM).
func status(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

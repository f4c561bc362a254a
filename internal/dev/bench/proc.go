package main

import (
	"errors"
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

	"golang.org/x/sys/unix"
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

// childPIDs lists the processes whose parent is pid (a scan of /proc: the
// host forks plugins from a thread other than its main one, so the main
// thread's children file does not list them).
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(n)
		if err == nil && st.ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// descendants returns every process below pid (children, their children,
// ...), in no particular order.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(n); err == nil {
			parent[n] = st.ppid
		}
	}
	var out []int
	for n := range parent {
		for p := parent[n]; p != 0; p = parent[p] {
			if p == pid {
				out = append(out, n)
				break
			}
			if _, ok := parent[p]; !ok {
				break
			}
		}
	}
	return out
}

type procStat struct {
	ppid         int
	utime, stime uint64 // clock ticks
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return procStat{}, errors.New("bad stat")
	}
	f := strings.Fields(s[i+2:])
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, errors.New("short stat")
	}
	var st procStat
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseUint(f[11], 10, 64)
	st.stime, _ = strconv.ParseUint(f[12], 10, 64)
	return st, nil
}

var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
}()

// cpuSeconds is the CPU time (user + system) of the given processes, each
// counting its threads, live and exited.
func cpuSeconds(pids []int) (float64, error) {
	var total float64
	for _, pid := range pids {
		s, err := processCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d gone: %w", pid, err)
		}
		total += s
	}
	return total, nil
}

// processCPU reads a process's CPU clock (clock_gettime of its
// CLOCK_PROCESS_CPUTIME_ID, the scheduler's sum_exec_runtime of the thread
// group) in nanoseconds: the quantity /proc/<pid>/stat's utime+stime are
// scaled to, without their 10 ms clock ticks, so that one scrape's CPU is
// measured, not rounded to a tick. Where the kernel does not answer for
// another process, utime+stime from /proc/<pid>/stat.
func processCPU(pid int) (float64, error) {
	var ts unix.Timespec
	// clock_getcpuclockid(pid): MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
	if err := unix.ClockGettime(int32(^pid<<3|2), &ts); err == nil && pid > 0 && pid < 1<<28 {
		return float64(ts.Nano()) / 1e9, nil
	}
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return float64(st.utime+st.stime) / clockTicks, nil
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

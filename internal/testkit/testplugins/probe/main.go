// Command probe is a test-only plugin (never shipped) that reports, as
// metrics, what it can do from inside its sandbox: its identity, capability
// sets and no_new_privs, and whether forbidden actions succeed. The sandbox
// tests assert both that each action is denied inside the sandbox and that
// it succeeds with the sandbox off, so the tests can fail.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk"
)

type config struct {
	ReadGranted string   `json:"read_granted"` // a file the manifest grants (control)
	ReadOutside string   `json:"read_outside"` // a file outside the granted paths
	WriteRO     string   `json:"write_read_only"`
	BindPort    int      `json:"bind_port"`  // a privileged port
	SetuidBin   string   `json:"setuid_bin"` // a setuid-root copy of this binary
	HogMiB      int      `json:"hog_mib"`    // allocate and touch this much in Collect
	EnvNames    []string `json:"env_names"`  // report which of these are set
	// Listeners outside the sandbox to send "probe <action>" to, each way a
	// plugin could take data out: TCP and UDP host:port, a pathname unix
	// stream socket, and an HTTP URL to GET (the host's own /metrics).
	TCP  string `json:"tcp"`
	UDP  string `json:"udp"`
	Unix string `json:"unix"`
	HTTP string `json:"http"`
	// A process outside the sandbox, of the plugin's own uid: whether the
	// plugin's PID namespace shows it (pidfd_open), whether the plugin may
	// signal it (kill with signal 0) and read its /proc/<pid>/cgroup.
	SiblingPID int `json:"sibling_pid"`
	// Kernel state shared with the host (issue 28 item 4): a user key of
	// this description in the session keyring (read it, plant another),
	// a SysV shared memory segment of this key (read it), an abstract unix
	// socket of this name to listen on (the test connects from outside),
	// and a file or directory of the probe's uid outside its grants whose
	// mode, owner, times and an extended attribute it tries to change
	// (each set to what it already is, or removed again).
	KeyDescription string `json:"key_description"`
	ShmKey         int    `json:"shm_key"`
	AbstractListen string `json:"abstract_listen"`
	MetadataPath   string `json:"metadata_path"`
	// Hostile resource use, for the cgroup tests: start this many children
	// (ForkExec of ForkBin with "30", e.g. /usr/bin/sleep) and report how
	// many started; map this much MAP_SHARED anonymous memory and fill it;
	// spin on this many threads from Configure on.
	Forks   int    `json:"forks"`
	ForkBin string `json:"fork_bin"`
	ShmMiB  int    `json:"shm_mib"`
	Spin    int    `json:"spin"`
	// Fill its socket directory (PLUGIN_UNIX_SOCKET_DIR) once, at the
	// first Collect: files of 64 KiB until a write fails, then empty files
	// until one cannot be made (issue 28 item 8). Kept, not removed.
	FillSocketDir bool `json:"fill_socket_dir"`
	// Write WriteMiB MiB to WriteFile (created or truncated) at every
	// Collect, 1 MiB a write, stopping at the first failure; report the
	// bytes written and the failure (limits.file_size, RLIMIT_FSIZE).
	WriteFile string `json:"write_file"`
	WriteMiB  int    `json:"write_mib"`
	// Write log lines to fd 2 as fast as the pipe takes them, from
	// Configure on (issue 28 item 2: the host's log budget drops them and
	// demotes the plugin).
	LogFlood bool `json:"log_flood"`
}

var (
	identity = sdk.NewDesc("probe_identity", sdk.Gauge, "1, labelled with the process credentials.", "uid", "gid", "euid")
	capsDesc = sdk.NewDesc("probe_capabilities", sdk.Gauge, "1, labelled with a capability set from /proc/self/status.", "set", "hex")
	nnp      = sdk.NewDesc("probe_no_new_privs", sdk.Gauge, "NoNewPrivs from /proc/self/status.")
	allowed  = sdk.NewDesc("probe_allowed", sdk.Gauge, "1 if the action succeeded, 0 if it was denied.", "action", "detail")
	envDesc  = sdk.NewDesc("probe_env_present", sdk.Gauge, "1 if the environment variable is set.", "name")
	hogDesc  = sdk.NewDesc("probe_hog_bytes", sdk.Gauge, "Bytes allocated and touched.")
	forked   = sdk.NewDesc("probe_forked", sdk.Gauge, "Children started of those asked for (forks).")
	shmDesc  = sdk.NewDesc("probe_shared_bytes", sdk.Gauge, "Bytes of MAP_SHARED memory mapped and filled (shm_mib), or 0 if the mapping was refused.")
	written  = sdk.NewDesc("probe_written_bytes", sdk.Gauge, "Bytes write_file wrote before it failed or finished.")
	filled   = sdk.NewDesc("probe_filled", sdk.Gauge, "What fill_socket_dir wrote into the socket directory before it failed.", "what")
	nsDepth  = sdk.NewDesc("probe_pid_namespace_depth", sdk.Gauge, "PID namespaces the probe is in, counted from the initial one (the fields of NSpid in /proc/self/status).")
)

type probe struct {
	cfg      config
	abstract net.Listener // AbstractListen's, open for the plugin's life
	fillOnce sync.Once
	fillErr  error
	fillB    int64 // bytes written
	fillN    int   // files made
}

// fill writes into dir until the file system refuses: 64 KiB files (blocks),
// then empty ones (inodes). Its error is the first refusal of each kind
// that is not ENOSPC (nil if both ended in ENOSPC).
func (p *probe) fill(dir string) {
	chunk := make([]byte, 64<<10)
	var err error
	for i := 0; ; i++ {
		var f *os.File
		if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("fill-%d", i))); err != nil {
			break
		}
		p.fillN++
		n, werr := f.Write(chunk)
		p.fillB += int64(n)
		f.Close()
		if err = werr; err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		p.fillErr = fmt.Errorf("fill blocks: %w", err)
		return
	}
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("inode-%d", i)))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				p.fillErr = fmt.Errorf("fill inodes: %w", err)
			}
			return
		}
		f.Close()
		p.fillN++
	}
}

func (p *probe) Info() sdk.Info {
	return sdk.Info{Name: strings.TrimPrefix(filepath.Base(os.Args[0]), "plexporter-"), Version: "0.0.1-test"}
}

func (p *probe) Configure(_ context.Context, c sdk.Config) error {
	if err := c.Decode(&p.cfg); err != nil {
		return err
	}
	if p.cfg.LogFlood {
		go func() {
			// fd 2 itself: after Serve, os.Stderr is go-plugin's stdio
			// stream, which the log budget does not see.
			line := []byte("probe: log flood " + strings.Repeat("x", 100) + "\n")
			for {
				if _, err := syscall.Write(2, line); err != nil && err != syscall.EINTR {
					return
				}
			}
		}()
	}
	for i := 0; i < p.cfg.Spin; i++ {
		go func() {
			for x := 0; ; x++ {
				_ = x
			}
		}()
	}
	return nil
}

// fork starts n children of bin and reports how many started; it kills and
// reaps them before it returns, so none outlives the probe's Collect.
func fork(w *sdk.Writer, n int, bin string) {
	var started []int
	for i := 0; i < n; i++ {
		pid, err := syscall.ForkExec(bin, []string{bin, "30"}, &syscall.ProcAttr{})
		if err != nil {
			continue
		}
		started = append(started, pid)
	}
	w.Gauge(forked, float64(len(started)))
	for _, pid := range started {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
}

// shm maps mib MiB of shared anonymous memory, writes every page and
// unmaps it: pages a private-memory rlimit does not count.
func shm(w *sdk.Writer, mib int) {
	b, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		w.Gauge(shmDesc, 0)
		return
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	w.Gauge(shmDesc, float64(len(b)))
	unix.Munmap(b)
}

func (p *probe) Collect(_ context.Context, w *sdk.Writer) error {
	w.Gauge(identity, 1, fmt.Sprint(os.Getuid()), fmt.Sprint(os.Getgid()), fmt.Sprint(os.Geteuid()))
	status, err := readStatus()
	if err != nil {
		return err
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		w.Gauge(capsDesc, 1, set, status[set])
	}
	if status["NoNewPrivs"] == "1" {
		w.Gauge(nnp, 1)
	} else {
		w.Gauge(nnp, 0)
	}
	check := func(action string, err error) {
		v := 0.0
		if err == nil {
			v = 1
		}
		detail := "ok"
		if err != nil {
			detail = errors.Unwrap(err).Error()
			if detail == "" {
				detail = err.Error()
			}
		}
		w.Gauge(allowed, v, action, detail)
	}
	if p.cfg.ReadGranted != "" {
		_, err := os.ReadFile(p.cfg.ReadGranted)
		check("read_granted", err)
	}
	if p.cfg.ReadOutside != "" {
		_, err := os.ReadFile(p.cfg.ReadOutside)
		check("read_outside", err)
	}
	if p.cfg.WriteRO != "" {
		f, err := os.OpenFile(p.cfg.WriteRO, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			f.Close()
		}
		check("write_read_only", err)
	}
	if p.cfg.BindPort > 0 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.cfg.BindPort))
		if err == nil {
			l.Close()
		} else if errors.Is(err, syscall.EADDRINUSE) {
			err = nil // the bind itself was permitted
		}
		check("bind_privileged_port", err)
	}
	if p.cfg.SetuidBin != "" {
		out, err := exec.Command(p.cfg.SetuidBin, "euid").Output()
		if err == nil && strings.TrimSpace(string(out)) != "0" {
			err = fmt.Errorf("gain root: %w", fmt.Errorf("euid stayed %s", strings.TrimSpace(string(out))))
		}
		check("setuid_gain_root", err)
	}
	// "<plugin> <action>" is what arrives outside.
	msg := func(action string) string { return p.Info().Name + " " + action + "\n" }
	send := func(action, network, addr string) {
		c, err := net.DialTimeout(network, addr, time.Second)
		if err == nil {
			_, err = c.Write([]byte(msg(action)))
			c.Close()
		}
		check(action, err)
	}
	if p.cfg.TCP != "" {
		send("net_tcp", "tcp", p.cfg.TCP) // Go tries MPTCP first, then plain TCP
		// What a C plugin does: one protocol, no fallback.
		check("net_tcp_raw", rawSend(0, p.cfg.TCP, msg("net_tcp_raw")))
		check("net_mptcp_raw", rawSend(unix.IPPROTO_MPTCP, p.cfg.TCP, msg("net_mptcp_raw")))
	}
	if p.cfg.UDP != "" {
		send("net_udp", "udp", p.cfg.UDP)
	}
	if p.cfg.Unix != "" {
		send("net_unix", "unix", p.cfg.Unix)
	}
	if p.cfg.HTTP != "" {
		// Over MPTCP, which Go falls back from to TCP when it cannot have it:
		// Landlock's TCP rules do not see MPTCP, so this reached the host's
		// /metrics before the seccomp filter refused MPTCP sockets.
		d := &net.Dialer{Timeout: time.Second}
		d.SetMultipathTCP(true)
		c := http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
		resp, err := c.Get(p.cfg.HTTP)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET: %w", errors.New(resp.Status))
			}
		}
		check("net_host_metrics", err)
	}
	w.Gauge(nsDepth, float64(len(strings.Fields(status["NSpid"]))))
	if pid := p.cfg.SiblingPID; pid > 0 {
		fd, err := unix.PidfdOpen(pid, 0) // ESRCH: not in this PID namespace's view
		if err == nil {
			unix.Close(fd)
		}
		check("see_sibling", wrap("pidfd_open", err))
		check("signal_sibling", wrap("kill", unix.Kill(pid, 0)))
		// What the same uid may change of another process besides signals,
		// each written back as it was read: its nice value, CPU affinity
		// and file-descriptor limit.
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
		if err == nil {
			err = unix.Setpriority(unix.PRIO_PROCESS, pid, 20-prio) // getpriority returns 20-nice
		}
		check("renice_sibling", wrap("setpriority", err))
		var cpus unix.CPUSet
		err = unix.SchedGetaffinity(pid, &cpus)
		if err == nil {
			err = unix.SchedSetaffinity(pid, &cpus)
		}
		check("set_sibling_affinity", wrap("sched_setaffinity", err))
		var lim unix.Rlimit
		err = unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim)
		if err == nil {
			err = unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil)
		}
		check("set_sibling_rlimit", wrap("prlimit64", err))
		// The control: the same calls on itself (pid 0).
		if prio, err = unix.Getpriority(unix.PRIO_PROCESS, 0); err == nil {
			err = unix.Setpriority(unix.PRIO_PROCESS, 0, 20-prio)
		}
		if err == nil {
			if err = unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &lim); err == nil {
				err = unix.Prlimit(0, unix.RLIMIT_NOFILE, &lim, nil)
			}
		}
		check("renice_and_rlimit_self", wrap("setpriority/prlimit64 self", err))
		_, err = os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		check("read_sibling_cgroup", err)
	}
	p.sharedState(check)
	for _, name := range p.cfg.EnvNames {
		_, ok := os.LookupEnv(name)
		v := 0.0
		if ok {
			v = 1
		}
		w.Gauge(envDesc, v, name)
	}
	if p.cfg.Forks > 0 {
		fork(w, p.cfg.Forks, p.cfg.ForkBin)
	}
	if p.cfg.ShmMiB > 0 {
		shm(w, p.cfg.ShmMiB)
	}
	if p.cfg.FillSocketDir {
		p.fillOnce.Do(func() { p.fill(os.Getenv("PLUGIN_UNIX_SOCKET_DIR")) })
		w.Gauge(filled, float64(p.fillB), "bytes")
		w.Gauge(filled, float64(p.fillN), "files")
		check("fill_socket_dir_enospc", p.fillErr)
	}
	if p.cfg.WriteFile != "" {
		n, err := writeMiB(p.cfg.WriteFile, p.cfg.WriteMiB)
		w.Gauge(written, float64(n))
		check("write_file", err)
	}
	if p.cfg.HogMiB > 0 {
		buf := make([]byte, p.cfg.HogMiB<<20)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		w.Gauge(hogDesc, float64(len(buf)))
	}
	return nil
}

// sharedState tries what issue 28 item 4 found a sandboxed plugin could do
// to kernel state it shares with the host and its uid.
func (p *probe) sharedState(check func(string, error)) {
	if d := p.cfg.KeyDescription; d != "" {
		id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", d, 0)
		if err == nil {
			buf := make([]byte, 256)
			_, err = unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		}
		check("read_host_key", wrap("keyctl", err))
		_, err = unix.AddKey("user", d+"-planted", []byte("planted"), unix.KEY_SPEC_SESSION_KEYRING)
		check("plant_key", wrap("add_key", err))
	}
	if p.cfg.ShmKey != 0 {
		id, err := unix.SysvShmGet(p.cfg.ShmKey, 0, 0)
		if err == nil {
			var b []byte
			if b, err = unix.SysvShmAttach(id, 0, unix.SHM_RDONLY); err == nil {
				if !strings.HasPrefix(string(b), "host secret") {
					err = fmt.Errorf("shmat: %w", errors.New("unexpected contents"))
				}
				unix.SysvShmDetach(b)
			}
		}
		check("read_host_shm", wrap("shmget", err))
	}
	if name := p.cfg.AbstractListen; name != "" {
		var err error
		if p.abstract == nil {
			var l net.Listener
			if l, err = net.Listen("unix", "@"+name); err == nil {
				p.abstract = l
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return
						}
						c.Write([]byte("probe abstract\n"))
						c.Close()
					}
				}()
			}
		}
		check("listen_abstract", wrap("listen", err))
	}
	if path := p.cfg.MetadataPath; path != "" {
		var st unix.Stat_t
		err := unix.Stat(path, &st)
		if err != nil {
			check("stat_metadata_path", wrap("stat", err))
			return
		}
		check("chmod_outside", wrap("chmod", unix.Chmod(path, st.Mode&0o7777)))
		check("chown_outside", wrap("chown", unix.Chown(path, int(st.Uid), int(st.Gid))))
		ts := []unix.Timespec{st.Atim, st.Mtim}
		check("utime_outside", wrap("utimensat", unix.UtimesNano(path, ts)))
		err = unix.Setxattr(path, "user.plexporter-probe", []byte("1"), 0)
		if err == nil {
			unix.Removexattr(path, "user.plexporter-probe")
		}
		check("setxattr_outside", wrap("setxattr", err))
	}
}

// writeMiB writes mib MiB of zeros to path, 1 MiB a write, and returns
// the bytes written and the first error.
func writeMiB(path string, mib int) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, wrap("open", err)
	}
	defer f.Close()
	var total int64
	chunk := make([]byte, 1<<20)
	for i := 0; i < mib; i++ {
		n, err := f.Write(chunk)
		total += int64(n)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return total, wrap("write", err)
		}
	}
	return total, nil
}

// wrap names the call that failed, so that the detail label is its errno.
func wrap(call string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", call, err)
}

// rawSend connects a TCP (proto 0) or MPTCP socket to an IPv4 host:port
// and writes msg, as a C plugin would.
func rawSend(proto int, hostport, msg string) error {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	_, err = unix.Write(fd, []byte(msg))
	return err
}

func readStatus() (map[string]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "euid" { // run as a setuid copy by the probe itself
		fmt.Println(os.Geteuid())
		return
	}
	// Installed as plexporter-escape*, it writes a marker beside its binary
	// as it starts, which only an unconfined root process can: the test of
	// `plexporter plugin check` (host/check_test.go) looks for it.
	if strings.HasPrefix(filepath.Base(os.Args[0]), "plexporter-escape") {
		if exe, err := os.Executable(); err == nil {
			os.WriteFile(exe+".escaped", []byte(fmt.Sprintln(os.Geteuid())), 0o644)
		}
	}
	sdk.Serve(&probe{})
}

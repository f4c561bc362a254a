package main

// Sandbox tests: a probe plugin reports from inside its sandbox what it
// can do. Every denial is checked twice: denied with the sandbox on, and
// allowed with it off (so each assertion can fail). CI runs as root.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/plexporter/plexporter/host/internal/launch"
)

// sandboxTree lays out a world-traversable plugin directory (the plugin
// user must reach its binary) with probe plugins, their manifests and data.
type sandboxTree struct {
	root, plugins, bin, data string
}

func newSandboxTree(t *testing.T) *sandboxTree {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandbox tests need root (CI runs as root)")
	}
	root, err := os.MkdirTemp("", "plexporter-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	st := &sandboxTree{root: root, plugins: filepath.Join(root, "plugins"), bin: filepath.Join(root, "bin"), data: filepath.Join(root, "data")}
	for _, d := range []string{root, st.plugins, st.bin, st.data} {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755)
	}
	copyFile(t, filepath.Join(binDir, "probe"), filepath.Join(st.bin, "probe"), 0o755)
	copyFile(t, filepath.Join(binDir, "probe"), filepath.Join(st.bin, "suid-probe"), 0o755)
	if err := os.Chmod(filepath.Join(st.bin, "suid-probe"), 0o4755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"granted.txt": 0o644, "secret.txt": 0o644, "ro.txt": 0o666} {
		p := filepath.Join(st.data, name)
		os.WriteFile(p, []byte(name), mode)
		os.Chmod(p, mode) // DAC allows; only the sandbox can deny
	}
	return st
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
}

// install links the probe as plexporter-<name> with the given manifest.
func (st *sandboxTree) install(t *testing.T, name, manifest string) {
	t.Helper()
	if err := os.Symlink(filepath.Join(st.bin, "probe"), filepath.Join(st.plugins, "plexporter-"+name)); err != nil {
		t.Fatal(err)
	}
	if manifest != "" {
		os.WriteFile(filepath.Join(st.plugins, "plexporter-"+name+".yaml"), []byte(manifest), 0o644)
	}
}

func (st *sandboxTree) probeManifest(extra string) string {
	return fmt.Sprintf(`user: nobody
group: nogroup
paths:
  read_only: [%s, %s, /proc/self/status, %s]
limits: {memory: 96MiB, nofile: 256}
env: [PROBE_ALLOWED]
%s`, filepath.Join(st.data, "granted.txt"), filepath.Join(st.data, "ro.txt"), filepath.Join(st.bin, "suid-probe"), extra)
}

func (st *sandboxTree) probeConfig(hog int) string {
	// A hog's Collect allocates and touches hog MiB: well under a second on
	// a quiet machine, many seconds on a loaded one. It gets a minute, not
	// the default 5 s timeout, so that only the sandbox's limit can fail it.
	timeout := ""
	if hog > 0 {
		timeout = ", timeout: 60s"
	}
	return fmt.Sprintf(`{config: {read_granted: %q, read_outside: %q, write_read_only: %q, bind_port: 81, setuid_bin: %q, env_names: [PROBE_ALLOWED, PROBE_SECRET], hog_mib: %d}%s}`,
		filepath.Join(st.data, "granted.txt"), filepath.Join(st.data, "secret.txt"), filepath.Join(st.data, "ro.txt"), filepath.Join(st.bin, "suid-probe"), hog, timeout)
}

// startSandboxHost runs a host on the tree's plugin dir, sandbox on unless
// args say otherwise, with the shipped config's opt-ins to the shipped
// privileged plugins' capabilities (withShippedOptIns).
func startSandboxHost(t *testing.T, st *sandboxTree, pluginsYAML string, args ...string) *host {
	t.Helper()
	pluginsYAML = withShippedOptIns(t, pluginsYAML)
	if !slices.Contains(args, "--no-plugin.sandbox") {
		args = append(args, "--plugin.sandbox")
	}
	return startHostIn(t, st.plugins, pluginsYAML, args...)
}

func TestSandboxConfinesPlugin(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "probe", st.probeManifest(""))
	st.install(t, "capprobe", st.probeManifest("capabilities: [CAP_NET_BIND_SERVICE]\nnetwork: {inet: {tcp_bind: [81]}}\n"))
	// CAP_NET_BIND_SERVICE is not known-safe: the operator opts in.
	cfg := fmt.Sprintf("  probe: %s\n  capprobe: %s, allow_capabilities: [CAP_NET_BIND_SERVICE]}\n", st.probeConfig(0), strings.TrimSuffix(st.probeConfig(0), "}"))

	on := startSandboxHost(t, st, cfg)
	text, mfs := on.scrape("")
	for _, p := range []string{"probe", "capprobe"} {
		if value(mfs, "plexporter_plugin_sandboxed", "plugin", p) != 1 || value(mfs, "plexporter_plugin_up", "plugin", p) != 1 {
			t.Fatalf("%s not up and sandboxed:\n%s", p, text)
		}
	}
	// the probe is one binary installed twice; tell its two series apart by
	// scraping each plugin alone
	_, probe := on.scrape("?collect[]=probe")
	_, capprobe := on.scrape("?collect[]=capprobe")
	want := func(_ map[string]*dto.MetricFamily, what string, got, wantV float64) {
		t.Helper()
		if got != wantV {
			t.Errorf("%s = %v, want %v", what, got, wantV)
		}
	}
	want(probe, "identity nobody/nogroup", value(probe, "probe_identity", "uid", "65534", "gid", "65534", "euid", "65534"), 1)
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		want(probe, "probe "+set+" empty", value(probe, "probe_capabilities", "set", set, "hex", "0000000000000000"), 1)
		want(capprobe, "capprobe "+set+" = CAP_NET_BIND_SERVICE only", value(capprobe, "probe_capabilities", "set", set, "hex", "0000000000000400"), 1)
	}
	want(probe, "no_new_privs", value(probe, "probe_no_new_privs"), 1)
	want(probe, "read a granted file", value(probe, "probe_allowed", "action", "read_granted"), 1)
	want(probe, "read outside the granted paths", value(probe, "probe_allowed", "action", "read_outside"), 0)
	want(probe, "write a read-only path", value(probe, "probe_allowed", "action", "write_read_only"), 0)
	want(probe, "bind port 81 without CAP_NET_BIND_SERVICE", value(probe, "probe_allowed", "action", "bind_privileged_port"), 0)
	want(capprobe, "bind port 81 with CAP_NET_BIND_SERVICE", value(capprobe, "probe_allowed", "action", "bind_privileged_port"), 1)
	want(probe, "gain root through a setuid-root binary", value(probe, "probe_allowed", "action", "setuid_gain_root"), 0)
	want(probe, "allowed env var passed", value(probe, "probe_env_present", "name", "PROBE_ALLOWED"), 1)
	want(probe, "other env var withheld", value(probe, "probe_env_present", "name", "PROBE_SECRET"), 0)

	// The same checks with the sandbox off must succeed, or the assertions
	// above prove nothing.
	off := startSandboxHost(t, st, cfg, "--no-plugin.sandbox")
	_, free := off.scrape("?collect[]=probe")
	want(free, "sandboxed off", value(free, "plexporter_plugin_sandboxed", "plugin", "probe"), 0)
	want(free, "runs as root when off", value(free, "probe_identity", "uid", "0", "gid", "0", "euid", "0"), 1)
	want(free, "no_new_privs off", value(free, "probe_no_new_privs"), 0)
	for _, action := range []string{"read_outside", "write_read_only", "bind_privileged_port", "setuid_gain_root"} {
		want(free, action+" without sandbox", value(free, "probe_allowed", "action", action), 1)
	}
}

func TestSandboxMemoryLimitKillsOnlyThatPlugin(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "probe", st.probeManifest(""))
	st.install(t, "hog", st.probeManifest(""))
	cfg := fmt.Sprintf("  probe: %s\n  hog: %s\n", st.probeConfig(0), st.probeConfig(512))
	h := startSandboxHost(t, st, cfg)
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_scrape_success", "plugin", "hog") != 0 {
		t.Fatal("a plugin allocating 512 MiB under a 96 MiB limit must fail")
	}
	if value(mfs, "plexporter_plugin_scrape_success", "plugin", "probe") != 1 || value(mfs, "probe_allowed", "action", "read_granted") != 1 {
		t.Fatal("the other plugin was affected")
	}
	h.waitFor(5*time.Second, "hog restarted", func() bool {
		_, mfs := h.scrape("?collect[]=probe")
		return value(mfs, "plexporter_plugin_restarts_total", "plugin", "hog") >= 1
	})
	// Under RLIMIT_DATA the Go runtime dies in more than one way ("out of
	// memory", "cannot allocate memory", even a SIGSEGV inside the GC); what
	// matters is that the host saw it die and restarted it.
	if !strings.Contains(h.logs.String(), `msg="plugin down; restarting" plugin=hog`) {
		t.Errorf("the hog's death is not in the host log")
	}

	// Without the sandbox the same allocation succeeds: in a later scrape
	// if not the first (a loaded machine may be slow to give a process
	// 512 MiB; the failure, if any, is in the log).
	off := startSandboxHost(t, st, cfg, "--no-plugin.sandbox")
	off.waitFor(time.Minute, "the unconfined hog's successful collect", func() bool {
		_, mfs := off.scrape("")
		return value(mfs, "plexporter_plugin_scrape_success", "plugin", "hog") == 1
	})
}

func TestSandboxRefusals(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "good", st.probeManifest(""))
	st.install(t, "pinned", st.probeManifest("sha256: "+strings.Repeat("ab", 32)+"\n"))
	st.install(t, "nouser", "user: no-such-user-here\n")
	st.install(t, "rootless", "user: root\n")
	st.install(t, "badcap", "capabilities: [CAP_NO_SUCH_THING]\n")
	h := startSandboxHost(t, st, "")
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_up", "plugin", "good") != 1 {
		t.Fatal("good plugin not running")
	}
	for name, reason := range map[string]string{
		"pinned":   "the manifest pins",
		"nouser":   "no-such-user-here",
		"rootless": "allow_root",
		"badcap":   "capabilit",
	} {
		if value(mfs, "plexporter_plugin_refused", "plugin", name) != 1 || value(mfs, "plexporter_plugin_up", "plugin", name) != 0 {
			t.Errorf("%s not refused", name)
		}
		if !strings.Contains(h.logs.String(), reason) {
			t.Errorf("refusal of %s: log lacks %q", name, reason)
		}
	}
	// pinned with the right checksum runs
	sum, _ := launch.FileSHA256(filepath.Join(st.bin, "probe"))
	os.WriteFile(filepath.Join(st.plugins, "plexporter-pinned.yaml"), []byte(st.probeManifest("sha256: "+sum+"\n")), 0o644)
	h.waitFor(5*time.Second, "correctly pinned plugin running", func() bool {
		_, mfs := h.scrape("")
		return value(mfs, "plexporter_plugin_up", "plugin", "pinned") == 1
	})
}

func TestSandboxStrictModes(t *testing.T) {
	st := newSandboxTree(t)
	st.install(t, "probe", st.probeManifest(""))
	os.Chmod(st.bin, 0o777) // anyone could replace the binary
	h := startSandboxHost(t, st, "")
	_, mfs := h.scrape("")
	if value(mfs, "plexporter_plugin_refused", "plugin", "probe") != 1 || !strings.Contains(h.logs.String(), "writable by group or others") {
		t.Fatal("a plugin in a world-writable directory must be refused")
	}
	lax := startSandboxHost(t, st, "", "--plugin.insecure-permissions")
	if _, mfs := lax.scrape(""); value(mfs, "plexporter_plugin_up", "plugin", "probe") != 1 {
		t.Fatal("--plugin.insecure-permissions must let it run")
	}
}

// Every shipped plugin must start and collect cleanly inside the sandbox its
// own manifest describes, on this machine's real /sys and /proc.
func TestShippedPluginsRunInTheirSandbox(t *testing.T) {
	st := newSandboxTree(t)
	bins, _ := filepath.Glob(filepath.Join(binDir, "shipped", "plexporter-*"))
	if len(bins) == 0 {
		t.Fatal("no shipped plugins built")
	}
	var names []string
	for _, b := range bins {
		name := strings.TrimPrefix(filepath.Base(b), "plexporter-")
		names = append(names, name)
		copyFile(t, b, filepath.Join(st.plugins, filepath.Base(b)), 0o755)
		manifest, err := filepath.Glob(filepath.Join("..", "plugins", name, "plexporter-"+name+".yaml"))
		if err != nil || len(manifest) != 1 {
			t.Fatalf("plugin %s ships no manifest", name)
		}
		copyFile(t, manifest[0], filepath.Join(st.plugins, "plexporter-"+name+".yaml"), 0o644)
	}
	// textfile's default directory is the package's; here it reads one of
	// the tree's, granted instead (an override's list replaces the file's).
	textfile := filepath.Join(st.data, "textfile")
	if err := os.Mkdir(textfile, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(textfile, "job.prom"), []byte("job_info{job=\"1\"} 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startSandboxHost(t, st, fmt.Sprintf("  textfile: {config: {directories: [%q]}, manifest: {paths: {read_only: [%q]}}}\n", textfile, textfile))
	text, mfs := h.scrape("")
	for _, name := range names {
		for _, m := range []string{"plexporter_plugin_up", "plexporter_plugin_sandboxed", "plexporter_plugin_scrape_success"} {
			if value(mfs, m, "plugin", name) != 1 {
				t.Errorf("%s{plugin=%q} != 1", m, name)
			}
		}
	}
	if errs := mfs["plexporter_plugin_collect_errors_total"]; errs != nil {
		t.Errorf("shipped plugins report errors inside their sandbox:\n%v", errs)
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", text)
	}
}

// The lifeline and the parent-death signal must survive the launcher's
// credential switch and exec: a sandboxed plugin and its children die with
// the host.
func TestSandboxedPluginDiesWithTheHost(t *testing.T) {
	st, pids := victimTree(t)
	pidFile := filepath.Join(pids, "victim.pid")
	h := startSandboxHost(t, st, fmt.Sprintf("  victim: {config: {spawn_child: true, pid_file: %q}}\n", pidFile))
	pid, child := readPIDs(t, pidFile)
	found := pluginHostPIDs(t, h, pid, child) // as the test sees them, outside the plugin's PID namespace
	pid, child = found[0], found[1]
	if _, mfs := h.scrape(""); value(mfs, "plexporter_plugin_sandboxed", "plugin", "victim") != 1 || !alive(pid) || !alive(child) {
		t.Fatal("sandboxed plugin and its child should be running")
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
	h.waitFor(3*time.Second, "sandboxed plugin and its child gone", func() bool { return !alive(pid) && !alive(child) })
}

// pluginHostPIDs maps pids as h's one plugin sees them (its PID namespace,
// when sandboxed) to pids in the test's namespace, where alive and kill
// work. The plugin's namespace is that of the host's child process (the
// plugin's launcher, the namespace's init); without one, the pids are
// already the test's.
func pluginHostPIDs(t *testing.T, h *host, nspids ...int) []int {
	t.Helper()
	nsOf := func(pid int) string { l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); return l }
	var procs []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			procs = append(procs, pid)
		}
	}
	var ns string
	for _, p := range procs {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil {
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(h.cmd.Process.Pid) {
				if ns != "" && ns != nsOf(p) {
					t.Fatal("the host has children in several PID namespaces; run one plugin")
				}
				ns = nsOf(p)
			}
		}
	}
	if ns == "" {
		t.Fatal("the host has no plugin process")
	}
	if ns == nsOf(os.Getpid()) {
		return nspids
	}
	out := make([]int, len(nspids))
	for _, p := range procs {
		if nsOf(p) != ns {
			continue
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" {
				for i, nspid := range nspids {
					if f[len(f)-1] == strconv.Itoa(nspid) {
						out[i] = p
					}
				}
			}
		}
	}
	return out
}

// victimTree installs the chaos plugin as "victim", allowed to write its pid
// files into the returned directory.
func victimTree(t *testing.T) (*sandboxTree, string) {
	t.Helper()
	st := newSandboxTree(t)
	copyFile(t, filepath.Join(binDir, "chaos"), filepath.Join(st.bin, "chaos"), 0o755)
	pids := filepath.Join(st.data, "pids")
	os.Mkdir(pids, 0o777)
	os.Chmod(pids, 0o777)
	if err := os.Symlink(filepath.Join(st.bin, "chaos"), filepath.Join(st.plugins, "plexporter-victim")); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf("user: nobody\ngroup: nogroup\npaths:\n  read_only: [/bin, /usr/bin]\n  read_write: [%s]\n", pids)
	os.WriteFile(filepath.Join(st.plugins, "plexporter-victim.yaml"), []byte(manifest), 0o644)
	return st, pids
}

// A plugin's descendants die with it however they leave: a daemon (setsid,
// double fork) escapes the process-group kill, the lifeline and the
// parent-death signal, not the end of the plugin's PID namespace.
func TestSandboxedPluginDaemonsDie(t *testing.T) {
	start := func(t *testing.T, args ...string) (h *host, plugin, daemon int) {
		st, pids := victimTree(t)
		pidFile, daemonFile := filepath.Join(pids, "victim.pid"), filepath.Join(pids, "daemon.pid")
		h = startSandboxHost(t, st, fmt.Sprintf("  victim: {config: {pid_file: %q, daemon_pid_file: %q}}\n", pidFile, daemonFile), args...)
		plugin, _ = readPIDs(t, pidFile)
		h.waitFor(3*time.Second, "the daemon's pid file", func() bool {
			b, err := os.ReadFile(daemonFile)
			return err == nil && strings.HasSuffix(string(b), "\n")
		})
		b, _ := os.ReadFile(daemonFile)
		nsDaemon, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		found := pluginHostPIDs(t, h, plugin, nsDaemon)
		if plugin, daemon = found[0], found[1]; !alive(plugin) || !alive(daemon) {
			t.Fatal("the plugin and its daemon should be running")
		}
		t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
		return h, plugin, daemon
	}
	for _, how := range []string{"host SIGKILL", "host SIGTERM", "plugin dies"} {
		t.Run(how, func(t *testing.T) {
			h, plugin, daemon := start(t)
			switch how {
			case "host SIGKILL":
				h.cmd.Process.Kill()
				h.cmd.Wait()
			case "host SIGTERM":
				h.cmd.Process.Signal(syscall.SIGTERM)
				h.cmd.Wait()
			case "plugin dies":
				syscall.Kill(plugin, syscall.SIGKILL)
			}
			h.waitFor(3*time.Second, "the daemon gone with the plugin", func() bool { return !alive(daemon) })
		})
	}
	// Without the sandbox the daemon must escape, or the above proves nothing.
	t.Run("sandbox off", func(t *testing.T) {
		h, _, daemon := start(t, "--no-plugin.sandbox")
		h.cmd.Process.Kill()
		h.cmd.Wait()
		time.Sleep(time.Second)
		if !alive(daemon) {
			t.Fatal("with the sandbox off the daemon should have outlived the host")
		}
	})
}

// outside is a set of listeners outside the sandbox: TCP, UDP and a
// pathname unix stream socket; each line that reaches one is recorded.
type outside struct {
	tcp, udp net.Addr
	unix     string
	got      chan string
}

func newOutside(t *testing.T, dir string) *outside {
	t.Helper()
	o := &outside{unix: filepath.Join(dir, "outside.sock"), got: make(chan string, 64)}
	serve := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			o.got <- strings.TrimSpace(line)
		}
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	xl, err := net.Listen("unix", o.unix)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(o.unix, 0o777) // file modes let any user connect: only the sandbox can refuse
	t.Cleanup(func() { tl.Close(); ul.Close(); xl.Close() })
	o.tcp, o.udp = tl.Addr(), ul.LocalAddr()
	go serve(tl)
	go serve(xl)
	go func() {
		buf := make([]byte, 512)
		for {
			n, _, err := ul.ReadFrom(buf)
			if err != nil {
				return
			}
			o.got <- strings.TrimSpace(string(buf[:n]))
		}
	}()
	return o
}

// arrived is what reached the listeners since the last call. The lines
// are read asynchronously: it waits (up to a minute) for those in expect,
// what the plugin says got through, then takes whatever else is there.
func (o *outside) arrived(expect ...string) map[string]bool {
	out := map[string]bool{}
	missing := func() bool {
		for _, e := range expect {
			if !out[e] {
				return true
			}
		}
		return false
	}
	for deadline := time.After(time.Minute); missing(); {
		select {
		case m := <-o.got:
			out[m] = true
		case <-deadline:
			return out
		}
	}
	for {
		select {
		case m := <-o.got:
			out[m] = true
		default:
			return out
		}
	}
}

// Network access is a grant. By default a sandboxed plugin reaches nothing
// over TCP (plain or MPTCP), UDP or a pathname unix socket, nor the host's
// own HTTP port; granted, each gets through (MPTCP never: Landlock cannot
// hold it to the granted ports); with the sandbox off, everything does.
func TestSandboxDeniesNetwork(t *testing.T) {
	st := newSandboxTree(t)
	out := newOutside(t, st.root) // a directory the plugin's user may search
	hostAddr := freePort(t)       // the host's second listen address, for the probe
	tcpPort, hostPort := out.tcp.(*net.TCPAddr).Port, hostAddr[strings.LastIndexByte(hostAddr, ':')+1:]
	// The host's self-metrics only: a selection with the probe in it would
	// wait for the very collect that asks.
	cfg := fmt.Sprintf("{config: {tcp: %q, udp: %q, unix: %q, http: %q}}", out.tcp, out.udp, out.unix, "http://"+hostAddr+"/healthz")
	st.install(t, "probe", st.probeManifest(""))
	st.install(t, "granted", st.probeManifest(fmt.Sprintf("network: {unix: [%s], inet: {tcp_connect: [%d, %s], udp: true}}\n", out.unix, tcpPort, hostPort)))
	st.install(t, "otherport", st.probeManifest("network: {inet: {tcp_connect: [9]}}\n"))
	pluginsYAML := fmt.Sprintf("  probe: %s\n  granted: %s\n  otherport: %s\n", cfg, cfg, cfg)
	actions := []string{"net_tcp", "net_tcp_raw", "net_mptcp_raw", "net_udp", "net_unix", "net_host_metrics"}
	abi, _ := llsyscall.LandlockGetABIVersion()

	// A grant that connects, on a kernel whose Landlock cannot hold connect
	// to the granted unix sockets, needs the operator's consent.
	strict := startSandboxHost(t, st, pluginsYAML, "--web.listen-address="+hostAddr)
	_, mfs := strict.scrape("")
	for _, p := range []string{"granted", "otherport"} {
		refused := value(mfs, "plexporter_plugin_refused", "plugin", p) == 1
		if abi < 9 && (!refused || !strings.Contains(strict.logs.String(), fmt.Sprintf(`plugin \"%s\": its manifest's network grant`, p)) || !strings.Contains(strict.logs.String(), "--plugin.allow-any-unix-connect")) {
			t.Errorf("Landlock ABI %d: %s must be refused, naming itself and --plugin.allow-any-unix-connect", abi, p)
		}
		if abi >= 9 && refused {
			t.Errorf("Landlock ABI %d restricts unix connect: %s must run", abi, p)
		}
	}
	strict.cmd.Process.Signal(syscall.SIGTERM)
	strict.cmd.Wait()
	out.arrived() // what this host's plugins sent (on ABI >= 9 all three ran) is not the next one's

	h := startSandboxHost(t, st, pluginsYAML, "--web.listen-address="+hostAddr, "--plugin.allow-any-unix-connect")
	scrape := func(h *host, plugin string) (map[string]*dto.MetricFamily, map[string]bool) {
		t.Helper()
		_, mfs := h.scrape("?collect[]=" + plugin)
		if value(mfs, "plexporter_plugin_scrape_success", "plugin", plugin) != 1 {
			t.Fatalf("%s did not collect", plugin)
		}
		var sent []string // what the probe says got through
		for _, a := range actions {
			if a != "net_host_metrics" && value(mfs, "probe_allowed", "action", a) == 1 {
				sent = append(sent, plugin+" "+a)
			}
		}
		return mfs, out.arrived(sent...)
	}
	check := func(plugin string, mfs map[string]*dto.MetricFamily, arrived map[string]bool, allowed ...string) {
		t.Helper()
		for _, a := range actions {
			want := slices.Contains(allowed, a)
			if got := value(mfs, "probe_allowed", "action", a) == 1; got != want {
				t.Errorf("%s: %s allowed = %v, want %v", plugin, a, got, want)
			}
			if a != "net_host_metrics" && arrived[plugin+" "+a] != want { // the host's answer is the proof there
				t.Errorf("%s: %s data arrived outside = %v, want %v", plugin, a, arrived[plugin+" "+a], want)
			}
		}
	}
	mfs, arrived := scrape(h, "probe")
	check("probe", mfs, arrived)
	mfs, arrived = scrape(h, "granted")
	check("granted", mfs, arrived, "net_tcp", "net_tcp_raw", "net_udp", "net_unix", "net_host_metrics")
	// Granted another port only: TCP stays closed; a unix socket is open
	// exactly where Landlock cannot restrict connect (the risk the flag took).
	mfs, arrived = scrape(h, "otherport")
	if abi < 9 {
		check("otherport", mfs, arrived, "net_unix")
	} else {
		check("otherport", mfs, arrived)
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.cmd.Wait()

	off := startSandboxHost(t, st, pluginsYAML, "--no-plugin.sandbox", "--web.listen-address="+hostAddr)
	mfs, arrived = scrape(off, "probe")
	check("probe", mfs, arrived, actions...)
	if t.Failed() {
		t.Logf("Landlock ABI %d", abi)
	}
}

// withShippedOptIns adds to a config's plugins: section (pluginsYAML, as
// startHostIn takes it) the allow_capabilities of the shipped
// /etc/plexporter/plexporter.yml (deploy/etc/plexporter.yml), for each
// plugin the section does not opt in itself: a shipped plugin runs under
// the sandbox as it does on an installed node, and the shipped config is
// shown to opt in to what the shipped manifests grant.
func withShippedOptIns(t testing.TB, pluginsYAML string) string {
	t.Helper()
	var shipped struct {
		Plugins map[string]struct {
			AllowCapabilities []string `yaml:"allow_capabilities"`
		} `yaml:"plugins"`
	}
	data, err := os.ReadFile(filepath.Join("..", "deploy", "etc", "plexporter.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &shipped); err != nil {
		t.Fatalf("deploy/etc/plexporter.yml: %v", err)
	}
	var cfg struct {
		Plugins map[string]map[string]any `yaml:"plugins"`
	}
	if err := yaml.Unmarshal([]byte("plugins:\n"+pluginsYAML), &cfg); err != nil {
		t.Fatalf("test config: %v\n%s", err, pluginsYAML)
	}
	if cfg.Plugins == nil {
		cfg.Plugins = map[string]map[string]any{}
	}
	for name, p := range shipped.Plugins {
		if len(p.AllowCapabilities) == 0 {
			continue
		}
		if cfg.Plugins[name] == nil {
			cfg.Plugins[name] = map[string]any{}
		}
		if _, set := cfg.Plugins[name]["allow_capabilities"]; !set {
			cfg.Plugins[name]["allow_capabilities"] = p.AllowCapabilities
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(string(out), "plugins:\n")
}

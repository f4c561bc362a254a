package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

const installedUnit = "/usr/lib/systemd/system/plexporter.service"

// TestInstall installs the host and every plugin package on this machine
// with dpkg, starts the installed host as its systemd unit would (same
// user, flags, environment, capability bounding set, no_new_privs and file
// system restrictions; there is no systemd PID 1 here), scrapes it, and
// purges the packages again. Opt-in (PLEXPORTER_INSTALL_TEST=1, as root):
// it changes the machine. CI sets it on its throw-away machine, for this
// test alone (.ci/run): the plexporter user it creates would otherwise
// appear under other tests' running plugins. A user that did not exist
// before is removed at the end (the packages leave it, as Debian policy
// asks), so that the machine's other tests see what they saw before.
func TestInstall(t *testing.T) {
	if os.Getenv("PLEXPORTER_INSTALL_TEST") != "1" {
		t.Skip("installs packages on this machine: set PLEXPORTER_INSTALL_TEST=1 (CI does, on a throw-away machine)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("PLEXPORTER_INSTALL_TEST=1 needs root (dpkg -i)")
	}
	needTools(t, "dpkg", "dpkg-query", "setpriv", "systemd-analyze")
	b := packages(t)
	names := []string{"plexporter"}
	for _, p := range shipped(t) {
		names = append(names, "plexporter-plugin-"+p)
	}
	purgeLeftovers(t, names)

	if _, err := user.Lookup("plexporter"); err != nil {
		t.Cleanup(func() { removeIdleUser(t) })
	}
	// The postinst creates the user: with systemd-sysusers here, and with
	// adduser where there is none (run alone, with a PATH that has no
	// systemd-sysusers).
	removeIdleUser(t)
	t.Run("adduser fallback", func(t *testing.T) {
		bin := t.TempDir()
		for _, tool := range []string{"sh", "getent", "adduser"} {
			path, err := exec.LookPath(tool)
			if err != nil {
				t.Skip(err)
			}
			if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(bin, "sh"), filepath.Join(repoRoot(t), "deploy", "debian", "postinst"), "configure", "")
		cmd.Env = []string{"PATH=" + bin}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("postinst without systemd-sysusers: %v\n%s", err, out)
		}
		checkUser(t)
	})
	removeIdleUser(t)

	var debs []string
	for _, n := range names {
		debs = append(debs, b.Debs[n])
	}
	t.Cleanup(func() { dpkgPurge(t, names) })
	if out, err := exec.Command("dpkg", append([]string{"-i"}, debs...)...).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	for _, n := range names {
		if out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", n).Output(); string(out) != "install ok installed" {
			t.Errorf("%s: dpkg status %q after dpkg -i", n, out)
		}
	}
	checkUser(t)
	if out, err := exec.Command("systemd-analyze", "verify", installedUnit).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", installedUnit, err, out)
	}

	unit := readUnit(t, installedUnit)
	bounding := unit.words("CapabilityBoundingSet")
	t.Run("as the unit", func(t *testing.T) {
		h := startAsUnit(t, unit, bounding)
		defer h.stop(t)
		states := h.pluginStates(t)
		for _, p := range shipped(t) {
			if s := states[p]; !s.up || !s.sandboxed {
				t.Errorf("plugin %s: up %v, sandboxed %v; want both (host log:\n%s)", p, s.up, s.sandboxed, h.log.String())
			}
		}
		u, err := user.Lookup("plexporter")
		if err != nil {
			t.Fatal(err)
		}
		uids := h.childUIDs(t)
		if len(uids) != len(shipped(t)) {
			t.Errorf("the host has %d child processes, want one per plugin (%d)", len(uids), len(shipped(t)))
		}
		for pid, uid := range uids {
			if uid != u.Uid {
				t.Errorf("plugin process %d runs as uid %s, want the plexporter user's %s", pid, uid, u.Uid)
			}
		}
		// The host's words for a missing plugin user (a plugin's own remark
		// that some path does not exist, like the attribution plugin's
		// absent kubelet socket, is not that).
		if strings.Contains(h.log.String(), `user "plexporter" does not exist`) {
			t.Errorf("the host warns about a missing user:\n%s", h.log.String())
		}
	})

	// Every capability in the bounding set is needed: without it, some
	// shipped plugin is not up in its sandbox. CAP_KILL is the exception
	// this test cannot show: the host needs it to SIGKILL the process group
	// of a plugin that does not exit when asked, but plugins built on the
	// SDK kill their own group when the host closes their lifeline.
	for _, c := range bounding {
		if c == "CAP_KILL" {
			continue
		}
		t.Run("without "+c, func(t *testing.T) {
			h, err := tryStartAsUnit(t, unit, slices.DeleteFunc(slices.Clone(bounding), func(x string) bool { return x == c }))
			if err != nil {
				t.Logf("the host does not start without %s: %v", c, err)
				return
			}
			defer h.stop(t)
			var broken []string
			for p, s := range h.pluginStates(t) {
				if !s.up || !s.sandboxed {
					broken = append(broken, p)
				}
			}
			if len(broken) == 0 {
				t.Errorf("every plugin is up and sandboxed without %s: the unit need not grant it", c)
			}
		})
	}

	// What the packages put on the machine, for the purge check below.
	var installed []string
	for _, deb := range debs {
		for path, e := range contents(t, deb) {
			if e.Mode[0] != 'd' || strings.Contains(path, "plexporter") {
				installed = append(installed, path)
			}
		}
	}
	dpkgPurge(t, names)
	leftovers := []string{
		"/etc/systemd/system/plexporter.service", // the mask of a removed unit
		"/etc/systemd/system/multi-user.target.wants/plexporter.service",
		"/var/lib/systemd/deb-systemd-helper-enabled/plexporter.service.dsh-also",
		"/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/plexporter.service",
		"/var/lib/systemd/deb-systemd-helper-masked/plexporter.service",
	}
	for _, path := range append(installed, leftovers...) {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s is left after dpkg --purge", path)
		}
	}
	for _, n := range names {
		if out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", n).Output(); len(out) > 0 && !strings.Contains(string(out), "not-installed") {
			t.Errorf("%s: dpkg status %q after the purge", n, out)
		}
	}
	// Debian policy: a system user stays when its package is purged.
	if _, err := user.Lookup("plexporter"); err != nil {
		t.Errorf("the plexporter user went with the purge: %v", err)
	}
}

func dpkgPurge(t *testing.T, names []string) {
	t.Helper()
	if out, err := exec.Command("dpkg", append([]string{"--purge"}, names...)...).CombinedOutput(); err != nil {
		t.Errorf("dpkg --purge: %v\n%s", err, out)
	}
}

// purgeLeftovers refuses to run over a plexporter that is installed, unless
// every installed one is a build from a source tree (version 0.0.0~git…,
// what `make package` makes): that is what an earlier run of this test
// leaves when it is killed between dpkg -i and its cleanup, and on a
// machine saved and reused after such a kill, the test would otherwise
// fail for ever. A release is never purged.
func purgeLeftovers(t *testing.T, names []string) {
	t.Helper()
	var leftovers []string
	for _, n := range names {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Status} ${Version}", n).Output()
		if err != nil || len(out) == 0 || strings.Contains(string(out), "not-installed") {
			continue
		}
		if !strings.Contains(string(out), "~git") {
			t.Fatalf("%s is installed already (%s) and is not a build of this tree; the test installs and purges it, so it will not run here", n, out)
		}
		leftovers = append(leftovers, n)
	}
	if len(leftovers) > 0 {
		t.Logf("purging what an interrupted earlier run left installed: %s", strings.Join(leftovers, " "))
		dpkgPurge(t, leftovers)
	}
}

// removeIdleUser deletes the plexporter user (and group) if it exists and
// runs no process, so that the package has to create it. A user some other
// test's plugin runs as is left alone (creation is then not re-tested).
func removeIdleUser(t *testing.T) {
	t.Helper()
	if _, err := user.Lookup("plexporter"); err != nil {
		return
	}
	if out, err := exec.Command("userdel", "plexporter").CombinedOutput(); err != nil {
		t.Logf("the plexporter user exists and stays (%v: %s); its creation is not tested this run", err, bytes.TrimSpace(out))
		return
	}
	exec.Command("groupdel", "plexporter").Run() // gone with the user where USERGROUPS_ENAB is set
}

// checkUser requires the system user the sysusers file declares.
func checkUser(t *testing.T) {
	t.Helper()
	out, err := exec.Command("getent", "passwd", "plexporter").Output()
	if err != nil {
		t.Fatalf("no plexporter user: %v", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	uid, _ := strconv.Atoi(f[2])
	if uid == 0 || uid >= 1000 || f[5] != "/nonexistent" || !strings.HasSuffix(f[6], "nologin") {
		t.Errorf("plexporter user %q: want a system uid (1-999), home /nonexistent, shell nologin", out)
	}
	g, err := user.LookupGroupId(f[3])
	if err != nil || g.Name != "plexporter" {
		t.Errorf("the plexporter user's primary group is %v (%v), want plexporter", g, err)
	}
}

// host is a running installed host.
type host struct {
	cmd  *exec.Cmd
	url  string
	log  *syncbuf.Buffer
	done chan struct{}
}

// startAsUnit starts the installed host the way systemd would start the
// unit: its ExecStart with $VARS from its EnvironmentFile, systemd's
// environment (PATH, RUNTIME_DIRECTORY), as root (the unit has no User=)
// with the capability bounding set caps and no_new_privs (setpriv), inside
// the unit's file-system restrictions and its system call and address
// family filter (unitSandbox). Only the listen address is added: a free
// port on loopback. Not emulated: ProtectKernelModules/Logs, ProtectHostname,
// RestrictRealtime, RestrictSUIDSGID, LockPersonality, PrivateMounts (each
// removes something no part of the host or the plugins uses).
func startAsUnit(t *testing.T, u unit, caps []string) *host {
	t.Helper()
	h, err := tryStartAsUnit(t, u, caps)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// tryStartAsUnit is startAsUnit, with a host that exits or does not get
// ready as an error.
func tryStartAsUnit(t *testing.T, u unit, caps []string) (*host, error) {
	t.Helper()
	if u.get("User") != "" || u.get("NoNewPrivileges") != "yes" || u.get("ProtectSystem") != "strict" || u.get("RuntimeDirectory") != "plexporter" {
		t.Fatalf("the unit's User=%q, NoNewPrivileges=%q, ProtectSystem=%q, RuntimeDirectory=%q are not what this emulation applies",
			u.get("User"), u.get("NoNewPrivileges"), u.get("ProtectSystem"), u.get("RuntimeDirectory"))
	}
	env := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "RUNTIME_DIRECTORY": "/run/plexporter"}
	for _, f := range u["EnvironmentFile"] {
		readEnvFile(t, strings.TrimPrefix(f, "-"), env)
	}
	var argv []string
	for _, w := range strings.Fields(u.get("ExecStart")) {
		if strings.HasPrefix(w, "$") { // systemd: $VAR is split into words
			argv = append(argv, strings.Fields(env[strings.Trim(w, "${}")])...)
			continue
		}
		argv = append(argv, w)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	argv = append(argv, "--web.listen-address="+addr)

	if _, err := os.Stat("/run/plexporter"); os.IsNotExist(err) { // the mount point of the runtime directory
		if err := os.Mkdir("/run/plexporter", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("/run/plexporter") })
	}
	var bounding []string
	for _, c := range caps {
		bounding = append(bounding, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{unitSandboxArg}
	if spec := unitSeccomp(t, u); spec != "" {
		args = append(args, "--seccomp="+spec)
	}
	args = append(append(args, setpriv,
		"--bounding-set=-all"+prefixComma(strings.Join(bounding, ",")),
		"--inh-caps=-all", "--no-new-privs", "--"), argv...)
	h := &host{cmd: exec.Command(self, args...), url: "http://" + addr, log: &syncbuf.Buffer{}, done: make(chan struct{})}
	for k, v := range env {
		h.cmd.Env = append(h.cmd.Env, k+"="+v)
	}
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { h.cmd.Wait(); close(h.done) }()
	deadline := time.Now().Add(time.Minute) // generous: a loaded machine starts slowly
	for {
		resp, err := http.Get(h.url + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return h, nil
			}
		}
		select {
		case <-h.done:
			return nil, fmt.Errorf("the host exited: %v\n%s", h.cmd.ProcessState, h.log.String())
		default:
		}
		if time.Now().After(deadline) {
			h.stop(t)
			return nil, fmt.Errorf("the host is not ready after a minute (%v):\n%s", err, h.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return "," + s
}

// readEnvFile reads KEY=VALUE lines (systemd's EnvironmentFile= syntax,
// without line continuations) into env.
func readEnvFile(t *testing.T, path string, env map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("EnvironmentFile %s: %v", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
}

func (h *host) stop(t *testing.T) {
	t.Helper()
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	// A stop takes well under a second on a quiet machine; a minute is a
	// margin no load reaches, so that only a host that does not stop (that
	// systemd would kill after the unit's TimeoutStopSec, 20 s) fails.
	case <-time.After(time.Minute):
		h.cmd.Process.Kill()
		<-h.done
		t.Errorf("the host did not stop within a minute of SIGTERM:\n%s", h.log.String())
	}
}

type pluginState struct{ up, sandboxed bool }

// pluginStates scrapes /metrics: each plugin's plexporter_plugin_up and
// plexporter_plugin_sandboxed.
func (h *host) pluginStates(t *testing.T) map[string]pluginState {
	t.Helper()
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	states := map[string]pluginState{}
	value := func(name string, set func(*pluginState, bool)) {
		for _, m := range families[name].GetMetric() {
			p := label(m, "plugin")
			s := states[p]
			set(&s, m.GetGauge().GetValue() == 1)
			states[p] = s
		}
	}
	value("plexporter_plugin_up", func(s *pluginState, v bool) { s.up = v })
	value("plexporter_plugin_sandboxed", func(s *pluginState, v bool) { s.sandboxed = v })
	var got []string
	for p := range states {
		got = append(got, p)
	}
	sort.Strings(got)
	if !slices.Equal(got, shipped(t)) {
		t.Errorf("the host reports plugins %v, want every installed one %v", got, shipped(t))
	}
	return states
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// childUIDs are the real uids of the host's child processes.
func (h *host) childUIDs(t *testing.T) map[int]string {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/status")
	out := map[int]string{}
	for _, path := range dirs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var ppid, uid string
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				uid = strings.Fields(v)[0]
			}
		}
		if ppid == strconv.Itoa(h.cmd.Process.Pid) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			out[pid] = uid
		}
	}
	return out
}

func (h *host) String() string { return fmt.Sprintf("host %s", h.url) }

package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The attribution plugin's process scans, against rping over rxe0 in a
// cgroup named as Slurm's cgroup v2 plugin names a job's step.
const (
	slurmJobID  = "4242"
	slurmStepCg = "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_" + slurmJobID + "/step_0"
	// secondHostAddr is the second host attribution checks start with only
	// that plugin: unsandboxed for cgroup_jobs (--no-plugin.sandbox),
	// because Landlock refuses it other processes' /proc/<pid>/fd;
	// sandboxed in the host's PID namespace (pid_namespace: host) for
	// rdma_qp_owners, because in a PID namespace of its own the kernel
	// shows it no other process's queue pairs (the plugin's README, The
	// sandbox). The installed host's sandboxed plugin is scraped too, and
	// what it sees is noted.
	secondHostAddr = "127.0.0.1:9881"
	// qpOwnerUser is the user of its own the rdma_qp_owners check gives
	// the plugin in the host's PID namespace: below Landlock ABI 6 the host
	// refuses that to a plugin running as the shared plexporter user.
	qpOwnerUser, qpOwnerUID = "plexporter-qp", 998
)

// qpOwnerManifest is the plugins.attribution.manifest override of the
// plugin's README (RDMA queue pair owners), plus extra lines.
func qpOwnerManifest(extra string) string {
	return "      pid_namespace: host\n      network: {netlink: [rdma]}\n      paths:\n" +
		"        read_only: [\"{sysfs}/bus/pci/devices\", \"{sysfs}/class/infiniband\", \"{sysfs}/class/net\", \"{sysfs}/class/nvme\", \"{sysfs}/devices\", \"{rootfs}/var/lib/plexporter/job-mapping\", \"{procfs}\"]\n" + extra
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// addSystemUser adds name as user and group uid, as guest.sh adds
// plexporter (busybox has no adduser), unless it exists.
func addSystemUser(name string, uid int) error {
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "\n"+name+":") || strings.HasPrefix(string(b), name+":") {
		return nil
	}
	for file, line := range map[string]string{
		"/etc/group":  fmt.Sprintf("%s:x:%d:\n", name, uid),
		"/etc/passwd": fmt.Sprintf("%s:x:%d:%d:%s:/nonexistent:/usr/sbin/nologin\n", name, uid, uid, name),
	} {
		f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rpingJob is an rping server and client over rxe0, both in the job's
// step cgroup, pinging until stopped.
type rpingJob struct{ server, client *exec.Cmd }

// startRpingJob starts the pair in slurmStepCg (made if missing): each is
// started by a shell that moves itself into the cgroup and then execs
// rping, so that rping's queue pairs are created by a process in the job.
func startRpingJob() (*rpingJob, error) {
	if err := os.MkdirAll(slurmStepCg, 0o755); err != nil {
		return nil, fmt.Errorf("make the job's cgroup (cgroup2 at /sys/fs/cgroup, test/lab/init): %w", err)
	}
	inJob := func(args ...string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", `echo $$ >"$0"/cgroup.procs && exec "$@"`, slurmStepCg, "rping"}, args...)...)
	}
	j := &rpingJob{server: inJob("-s", "-a", rxeAddr, "-p", "7174")}
	if err := j.server.Start(); err != nil {
		return nil, fmt.Errorf("rping server: %w", err)
	}
	if err := waitRpingListen("7174"); err != nil { // the server's listen before the client connects
		j.stop()
		return nil, err
	}
	// No -C: ping until killed, so the queue pairs exist at every scrape.
	j.client = inJob("-c", "-a", rxeAddr, "-p", "7174", "-S", "64")
	if err := j.client.Start(); err != nil {
		j.stop()
		return nil, fmt.Errorf("rping client: %w", err)
	}
	// The connection (and its queue pairs) is up once rdma lists the
	// client's; under TCG that takes seconds, on a loaded machine more.
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(time.Second) {
		qps, err := rdmaQPs()
		if err == nil && qps.count(j.pids(), rxeDevice, rxePort) >= 2 {
			return j, nil
		}
		if time.Now().After(deadline) {
			j.stop()
			return nil, fmt.Errorf("rping's queue pairs not listed by rdma resource show qp after 120 s (%v)", err)
		}
	}
}

// rpingListenWait bounds the wait for an rping server to listen.
const rpingListenWait = 120 * time.Second

// waitRpingListen waits until an rping server listens on port: its RDMA
// CM id is listed in state LISTEN (one line per id: "... state LISTEN ...
// src-addr 10.0.0.1:7174 ..."). A client started before that fails to
// connect; a fixed sleep was only a guess at how long TCG takes.
func waitRpingListen(port string) error {
	var (
		out string
		err error
	)
	for deadline := time.Now().Add(rpingListenWait); ; time.Sleep(500 * time.Millisecond) {
		out, err = run("rdma", "resource", "show", "cm_id")
		if err == nil {
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if slices.Contains(f, "LISTEN") && slices.ContainsFunc(f, func(s string) bool { return strings.HasSuffix(s, ":"+port) }) {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rping server not listening on port %s after %s: rdma resource show cm_id: %v: %.300q", port, rpingListenWait, err, out)
		}
	}
}

func (j *rpingJob) pids() map[int]bool {
	out := map[int]bool{}
	for _, c := range []*exec.Cmd{j.server, j.client} {
		if c != nil && c.Process != nil {
			out[c.Process.Pid] = true // the shell exec'd rping: same pid
		}
	}
	return out
}

func (j *rpingJob) stop() {
	for _, c := range []*exec.Cmd{j.client, j.server} {
		if c != nil && c.Process != nil {
			c.Process.Kill()
			c.Wait()
		}
	}
}

// rdmaQP is one queue pair of `rdma -j resource show qp`.
type rdmaQP struct {
	IfName string `json:"ifname"`
	Port   int    `json:"port"`
	LQPN   int    `json:"lqpn"`
	PID    int    `json:"pid"`
	Comm   string `json:"comm"`
}

type rdmaQPList []rdmaQP

func rdmaQPs() (rdmaQPList, error) {
	out, err := run("rdma", "-j", "resource", "show", "qp")
	if err != nil {
		return nil, err
	}
	var qps rdmaQPList
	if err := json.Unmarshal([]byte(out), &qps); err != nil {
		return nil, fmt.Errorf("rdma -j resource show qp: %w: %.200q", err, out)
	}
	return qps, nil
}

// count is the number of queue pairs of the pids on device and port.
func (qps rdmaQPList) count(pids map[int]bool, device, port string) int {
	n := 0
	for _, q := range qps {
		if pids[q.PID] && q.IfName == device && strconv.Itoa(q.Port) == port {
			n++
		}
	}
	return n
}

// unsandboxedHost starts a second host with only the attribution plugin,
// unsandboxed, configured by cfg (YAML under plugins.attribution.config),
// and returns a scraper for it and its stop function.
func unsandboxedHost(cfg string) (*scraper, func(), error) {
	s, _, stop, err := secondHost("unsandboxed", cfg, "")
	return s, stop, err
}

// secondHost starts a second host with only the attribution plugin,
// configured by cfg (YAML under plugins.attribution.config): unsandboxed
// if manifest is "", else sandboxed with manifest (YAML under
// plugins.attribution.manifest) overriding the installed one. It returns
// once the plugin is up or refused, with a scraper for the host, the
// host's log (out/plexporter-attribution-<name>.log) and its stop function.
func secondHost(name, cfg, manifest string) (*scraper, string, func(), error) {
	s, logPath, stop, err := startSecondHost(name, cfg, manifest)
	if err != nil {
		return nil, "", nil, err
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(2 * time.Second) {
		e, err := s.scrape()
		if err == nil {
			up, _ := e.value("plexporter_plugin_up", "plugin", "attribution")
			refused, _ := e.value("plexporter_plugin_refused", "plugin", "attribution")
			if up == 1 || refused == 1 {
				return s, logPath, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, "", nil, fmt.Errorf("the %s host's attribution plugin neither up nor refused after 90 s (%v; out/%s)", name, err, filepath.Base(logPath))
		}
	}
}

func startSecondHost(name, cfg, manifest string) (*scraper, string, func(), error) {
	dir, err := os.MkdirTemp("/run", "plexporter-attribution-")
	if err != nil {
		return nil, "", nil, err
	}
	os.Chmod(dir, 0o755)
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		return nil, "", nil, err
	}
	for _, f := range []string{"plexporter-attribution", "plexporter-attribution.yaml"} {
		b, err := os.ReadFile(filepath.Join(pluginDir, f))
		if err != nil {
			return nil, "", nil, err
		}
		if err := os.WriteFile(filepath.Join(plugins, f), b, 0o755); err != nil {
			return nil, "", nil, err
		}
	}
	config := filepath.Join(dir, "plexporter.yml")
	body := "plugins:\n  attribution:\n    allow_capabilities: [CAP_DAC_OVERRIDE]\n    config:\n" + cfg
	sandbox := "--no-plugin.sandbox"
	if manifest != "" {
		body += "    manifest:\n" + manifest
		sandbox = "--plugin.sandbox"
	}
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		return nil, "", nil, err
	}
	logPath := "/mnt/host/out/plexporter-attribution-" + name + ".log"
	log, err := os.Create(logPath)
	if err != nil {
		logPath = filepath.Join(dir, "log")
		log, _ = os.Create(logPath)
	}
	cmd := exec.Command("/usr/bin/plexporter", sandbox, "--plugin.dir="+plugins, "--config.file="+config,
		"--web.listen-address="+secondHostAddr, "--plugin.start-timeout=60s", "--plugin.runtime-dir="+filepath.Join(dir, "run"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, "", nil, err
	}
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		log.Close()
		os.RemoveAll(dir)
	}
	return newScraper("http://" + secondHostAddr + "/metrics"), logPath, stop, nil
}

// checkAttributionQPOwner: rping's queue pairs on rxe0 port 1, created by
// processes in job 4242's cgroup, are one rdma_qp_owner_info series with
// job_id 4242, and rdma_qp_owner_queue_pairs is the number of them that
// `rdma resource show qp` lists for rping's pids. The plugin runs
// sandboxed in a second host, in the host's PID namespace (the README's
// manifest override, as a user of its own); the same override for the
// default plexporter user must be refused below Landlock ABI 6 and run from
// it on. The installed host's plugin, in a PID namespace of its own, is
// noted.
func checkAttributionQPOwner(l *lab) error {
	job, err := startRpingJob()
	if err != nil {
		return err
	}
	defer job.stop()
	cfg := "      pod_resources_socket: \"\"\n      rdma_qp_owners: true\n"
	var errs []error
	abi := landlockABI()
	if err := checkHostPIDNamespaceRefusal(cfg, abi); err != nil {
		errs = append(errs, err)
	}
	if err := addSystemUser(qpOwnerUser, qpOwnerUID); err != nil {
		return err
	}
	s, logPath, stop, err := secondHost("pidns-host", cfg, qpOwnerManifest(fmt.Sprintf("      user: %s\n      group: %s\n", qpOwnerUser, qpOwnerUser)))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer stop()

	e, err := s.scrape()
	if err != nil {
		return err
	}
	qps, err := rdmaQPs()
	if err != nil {
		return err
	}
	want := qps.count(job.pids(), rxeDevice, rxePort)
	if up, _ := e.value("plexporter_plugin_up", "plugin", "attribution"); up != 1 {
		errs = append(errs, fmt.Errorf("the plugin with pid_namespace: host as %s is not up (out/%s)", qpOwnerUser, filepath.Base(logPath)))
	}
	if v, _ := e.value("plexporter_plugin_sandboxed", "plugin", "attribution"); v != 1 {
		errs = append(errs, fmt.Errorf("plexporter_plugin_sandboxed{plugin=\"attribution\"} = %v, want 1", v))
	}
	owner := []string{"device", rxeDevice, "port", rxePort, "job_id", slurmJobID, "pod_uid", ""}
	if info := e.series("rdma_qp_owner_info", owner...); len(info) != 1 {
		errs = append(errs, fmt.Errorf("%d series rdma_qp_owner_info{%s}, want 1 (all: %s)", len(info), pairs(owner), describe(e, "rdma_qp_owner_info")))
	}
	if got, err := e.value("rdma_qp_owner_queue_pairs", owner...); err != nil {
		errs = append(errs, err)
	} else if int(got) != want {
		errs = append(errs, fmt.Errorf("rdma_qp_owner_queue_pairs{%s} = %v, rdma resource show qp lists %d queue pairs of rping's pids %v", pairs(owner), got, want, keys(job.pids())))
	}
	if n, err := e.value("attribution_collection_errors_total", "collector", "rdma_qp_owners"); err != nil || n != 0 {
		errs = append(errs, fmt.Errorf("attribution_collection_errors_total{collector=\"rdma_qp_owners\"} = %v (%v), want 0", n, err))
	}
	l.note("sandboxed, pid_namespace: host, as %s (Landlock ABI %d): %s; rdma resource show qp: %d QPs of rping (pids %v) on %s/%s, %d in all", qpOwnerUser, abi, describe(e, "rdma_qp_owner_queue_pairs"), want, keys(job.pids()), rxeDevice, rxePort, len(qps))
	if err := captureQPDump(qpCaptureDir, job); err != nil {
		l.note("capture of the RES_QP_GET dump for plugins/attribution/testdata/nl-real: %v", err)
	} else {
		l.note("RES_QP_GET dump of %s captured in out/%s", rxeDevice, filepath.Base(qpCaptureDir))
	}

	// The installed host's plugin, sandboxed in a PID namespace of its own
	// (test/lab/plexporter.yml grants it RDMA netlink and {procfs}).
	if se, err := l.s.scrape(); err != nil {
		l.note("sandboxed: %v", err)
	} else {
		errsSandboxed, _ := se.value("attribution_collection_errors_total", "collector", "rdma_qp_owners")
		l.note("sandboxed, private PID namespace: %s, %v rdma_qp_owners errors", describe(se, "rdma_qp_owner_queue_pairs"), errsSandboxed)
	}
	return errors.Join(errs...)
}

// checkHostPIDNamespaceRefusal: the README's override for the default
// plugin user is refused below Landlock ABI 6 (the plugin could signal
// every plexporter process), naming the reason, and runs from ABI 6 on.
func checkHostPIDNamespaceRefusal(cfg string, abi int) error {
	s, logPath, stop, err := secondHost("pidns-host-default-user", cfg, qpOwnerManifest(""))
	if err != nil {
		return err
	}
	defer stop()
	e, err := s.scrape()
	if err != nil {
		return err
	}
	refused, _ := e.value("plexporter_plugin_refused", "plugin", "attribution")
	up, _ := e.value("plexporter_plugin_up", "plugin", "attribution")
	log, _ := os.ReadFile(logPath)
	const reason = "cannot scope signals"
	switch {
	case abi < 6 && (refused != 1 || !strings.Contains(string(log), reason)):
		return fmt.Errorf("pid_namespace: host for the default user on Landlock ABI %d: refused %v, want 1 with %q in out/%s", abi, refused, reason, filepath.Base(logPath))
	case abi >= 6 && up != 1:
		return fmt.Errorf("pid_namespace: host for the default user on Landlock ABI %d: up %v, want 1 (out/%s)", abi, up, filepath.Base(logPath))
	}
	return nil
}

// checkAttributionCgroupJobs: rping holds rxe0's verbs device
// (/dev/infiniband/uverbs0) open from job 4242's cgroup, which
// device_cgroup_job_info{device_kind="rdma",device="rxe0",job_id="4242"}
// says; the plugin unsandboxed as in checkAttributionQPOwner, the
// sandboxed one's view noted.
func checkAttributionCgroupJobs(l *lab) error {
	job, err := startRpingJob()
	if err != nil {
		return err
	}
	defer job.stop()
	s, stop, err := unsandboxedHost("      pod_resources_socket: \"\"\n      cgroup_jobs: true\n")
	if err != nil {
		return err
	}
	defer stop()
	e, err := s.scrape()
	if err != nil {
		return err
	}
	var errs []error
	want := []string{"device_kind", "rdma", "device", rxeDevice, "job_id", slurmJobID}
	if got := e.series("device_cgroup_job_info", want...); len(got) != 1 {
		errs = append(errs, fmt.Errorf("%d series device_cgroup_job_info{%s}, want 1 (all: %s)", len(got), pairs(want), describe(e, "device_cgroup_job_info")))
	}
	for _, c := range [][]string{{"attribution_collection_errors_total", "collector", "cgroup_jobs"}, {"attribution_unreadable_fd_dirs_total"}} {
		if n, err := e.value(c[0], c[1:]...); err != nil || n != 0 {
			errs = append(errs, fmt.Errorf("%s{%s} = %v (%v), want 0", c[0], pairs(c[1:]), n, err))
		}
	}
	var uverbs []string
	for pid := range job.pids() {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if t, err := os.Readlink(fd); err == nil && strings.HasPrefix(t, "/dev/infiniband/") {
				uverbs = append(uverbs, fmt.Sprintf("%d:%s", pid, t))
			}
		}
	}
	l.note("unsandboxed: %s; rping's /dev/infiniband fds: %v", describe(e, "device_cgroup_job_info"), uverbs)
	if se, err := l.s.scrape(); err == nil {
		l.note("sandboxed (cgroup_jobs off there): %s", describe(se, "device_cgroup_job_info"))
	}
	return errors.Join(errs...)
}

// qpCaptureDir receives captureQPDump's files, for
// plugins/attribution/testdata/nl-real.
const qpCaptureDir = "/mnt/host/out/nl-res-qp"

// captureQPDump records the kernel's raw answer to a RES_QP_GET dump of
// rxe0, as the attribution plugin asks for it, with what iproute2 and
// procfs say at the same moment: the fixture of the plugin's decoding test
// on a real kernel. The files: req_res_qp_dump_rxe0.bin (the request) and
// resp_res_qp_dump_rxe0.bin (every datagram of the answer, as received),
// rdma-res-show-qp.json (`rdma -j resource show qp`), owners.txt (rping's
// pids and their /proc/<pid>/cgroup).
func captureQPDump(dir string, job *rpingJob) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := run("rdma", "-j", "dev", "show", rxeDevice)
	if err != nil {
		return err
	}
	var devs []struct {
		Index  uint32 `json:"ifindex"`
		IfName string `json:"ifname"`
	}
	if err := json.Unmarshal([]byte(out), &devs); err != nil || len(devs) != 1 {
		return fmt.Errorf("rdma -j dev show %s: %v: %.200q", rxeDevice, err, out)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 20) // NETLINK_RDMA
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	// nlmsghdr + RDMA_NLDEV_ATTR_DEV_INDEX (u32): type RDMA_NL_NLDEV<<10 |
	// RDMA_NLDEV_CMD_RES_QP_GET, NLM_F_REQUEST|NLM_F_ACK|NLM_F_DUMP.
	req := make([]byte, 24)
	binary.NativeEndian.PutUint32(req[0:], 24)
	binary.NativeEndian.PutUint16(req[4:], 5<<10|10)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1)
	binary.NativeEndian.PutUint16(req[16:], 8)
	binary.NativeEndian.PutUint16(req[18:], 1)
	binary.NativeEndian.PutUint32(req[20:], devs[0].Index)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	var resp []byte
	buf := make([]byte, 1<<16)
	for done := false; !done; {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		resp = append(resp, buf[:n]...)
		for b := buf[:n]; len(b) >= 16; {
			l := int(binary.NativeEndian.Uint32(b))
			if t := binary.NativeEndian.Uint16(b[4:]); t == unix.NLMSG_DONE || t == unix.NLMSG_ERROR {
				done = true
			}
			if l < 16 || (l+3)&^3 > len(b) {
				break
			}
			b = b[(l+3)&^3:]
		}
	}
	show, err := run("rdma", "-j", "resource", "show", "qp")
	if err != nil {
		return err
	}
	var owners strings.Builder
	fmt.Fprintf(&owners, "captured by test/lab/guestcheck (attribution/rdma-qp-owner) on %s, %s dev index %d\n", kernelRelease(), rxeDevice, devs[0].Index)
	for _, pid := range keys(job.pids()) {
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		fmt.Fprintf(&owners, "rping pid %d cgroup %s", pid, cg)
	}
	for name, data := range map[string][]byte{
		"req_res_qp_dump_rxe0.bin":  req,
		"resp_res_qp_dump_rxe0.bin": resp,
		"rdma-res-show-qp.json":     []byte(show),
		"owners.txt":                []byte(owners.String()),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// describe renders a family's series as name{labels} value, for notes.
func describe(e exposition, name string) string {
	var out []string
	for _, m := range e[name].GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
		}
		out = append(out, fmt.Sprintf("%s{%s} %v", name, strings.Join(ls, ","), sampleValue(m)))
	}
	if len(out) == 0 {
		return "no " + name
	}
	return strings.Join(out, " ")
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

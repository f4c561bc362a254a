package main

// Container mode: the host and every shipped plugin in a pod-like layout —
// the image's file tree as the root (deploy/image-rootfs.sh's layout),
// its own mount and PID namespaces with the host as PID 1, the node's /sys
// and /proc under /host, the pod's capability bounding set, no_new_privs, a
// read-only root and an emptyDir for the plugins' sockets — with and
// without the node's network namespace. This machine has no RDMA, NVMe or
// NFS mounts, so /host/sys is the node's /sys with the plugins' RDMA and
// NVMe fixtures laid over it (overlayfs); the netdevs, /proc and the socket
// tables are the real ones.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

// podInitEnv carries a podInit (JSON) to the test binary re-executed as a
// pod's first process.
const podInitEnv = "PLEXPORTER_TEST_POD_INIT"

// podInit is what the pod's first process sets up before it becomes the
// host, as a container runtime would.
type podInit struct {
	Root    string   // the image's file tree, the pod's /
	Fixture string   // laid over the node's /sys at /host/sys
	Caps    []string // the bounding set (securityContext.capabilities.add, after drop: [ALL])
	Args    []string // the host's, after /usr/bin/plexporter
}

func init() {
	if spec := os.Getenv(podInitEnv); spec != "" {
		runPodInit(spec) // never returns
	}
}

// runPodInit runs in the pod's new mount, PID (and network) namespaces as
// its PID 1: it waits for the test to wire the network, mounts the
// volumes, enters the root, narrows its capabilities and execs the host.
func runPodInit(spec string) {
	runtime.LockOSThread() // capabilities are per thread: drop them on the one that execs
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "pod init: %s: %v\n", what, err)
		os.Exit(111)
	}
	var p podInit
	if err := json.Unmarshal([]byte(spec), &p); err != nil {
		fail("spec", err)
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail("waiting for the network", err)
	}
	r := p.Root
	mounts := []struct {
		what, src, dst, fstype string
		flags                  uintptr
		data                   string
	}{
		{"private mounts", "", "/", "", unix.MS_REC | unix.MS_PRIVATE, ""},
		{"root", r, r, "", unix.MS_BIND, ""},
		// hostPath /sys (with the fixtures), /proc: the node's, read-only.
		{"/host/sys", "overlay", r + "/host/sys", "overlay", unix.MS_RDONLY, "lowerdir=" + p.Fixture + ":/sys"},
		{"/host/proc", "/proc", r + "/host/proc", "", unix.MS_BIND, ""},
		{"/host/proc read-only", "", r + "/host/proc", "", unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY, ""},
		// The pod's own procfs, of its PID namespace.
		{"/proc", "proc", r + "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"/dev/null", "/dev/null", r + "/dev/null", "", unix.MS_BIND, ""},
		// emptyDir for the plugins' sockets: 0777, as Kubernetes makes it.
		{"/run/plexporter", "tmpfs", r + "/run/plexporter", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0777,size=1m"},
		// readOnlyRootFilesystem.
		{"root read-only", "", r, "", unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY, ""},
	}
	for _, m := range mounts {
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil {
			fail("mount "+m.what, err)
		}
	}
	if err := unix.Chroot(r); err != nil {
		fail("chroot", err)
	}
	if err := unix.Chdir("/"); err != nil {
		fail("chdir", err)
	}
	keep := map[cap.Value]bool{}
	for _, name := range p.Caps {
		c, err := cap.FromName("cap_" + strings.ToLower(strings.TrimPrefix(name, "CAP_"))) // Kubernetes names lack CAP_
		if err != nil {
			fail("capability "+name, err)
		}
		keep[c] = true
	}
	for c := cap.Value(0); c < cap.MaxBits(); c++ {
		if !keep[c] {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				fail("drop "+c.String(), err)
			}
		}
	}
	// allowPrivilegeEscalation: false.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail("no_new_privs", err)
	}
	// As root, exec makes the permitted and effective sets the bounding set.
	err := unix.Exec("/usr/bin/plexporter", append([]string{"/usr/bin/plexporter"}, p.Args...), []string{"PATH=/usr/bin"})
	fail("exec the host", err)
}

// podCapabilities reads what the shipped DaemonSets add to the container's
// capabilities (drop: [ALL]): the union over deploy/kubernetes/*.yaml.
func podCapabilities(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("../deploy/kubernetes/*.yaml")
	var caps []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		for {
			var doc struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								SecurityContext struct {
									Capabilities struct{ Add []string }
								} `yaml:"securityContext"`
							}
						}
					}
				}
			}
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc.Kind != "DaemonSet" {
				continue
			}
			for _, c := range doc.Spec.Template.Spec.Containers {
				for _, a := range c.SecurityContext.Capabilities.Add {
					if !slices.Contains(caps, a) {
						caps = append(caps, a)
					}
				}
			}
		}
	}
	if len(caps) == 0 {
		t.Fatal("no DaemonSet in deploy/kubernetes adds capabilities")
	}
	return caps
}

// podConfig is the pod's ConfigMap for this machine. rdma: the fixtures are
// sysfs only and this kernel has no RDMA netlink; ethtool: the fixtures'
// RDMA netdevs do not exist, so it reads the node's NICs (driver
// statistics); nvme: no controller to open; nfs: the node's mounts and
// sockets, as deploy/kubernetes/storage-client.yaml reads them; nvme opted
// in to its manifest's capabilities, as deploy/kubernetes/gpu-node.yaml does.
const podConfig = `plugins:
  rdma:
    config: {optional_counters: false}
  ethtool:
    config: {rdma: false, driver_stats: true}
  nvme:
    config: {smart: false}
    allow_capabilities: [CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH]
  nfs:
    config: {mountstats_path: /host/proc/1/mountstats, net_dir: /host/proc/1/net}
    manifest:
      capabilities: [CAP_DAC_READ_SEARCH]
      paths: {read_only: ["{procfs}/1/mountstats", "{procfs}/1/mountinfo", "{procfs}/1/net"]}
`

type podSpec struct {
	hostNetwork bool
	caps        []string
	config      string
	nic         string // the pod's interface name (own network namespace)
}

type pod struct {
	url  string
	logs *syncbuf.Buffer
}

// podAddr is the pod's side of its veth when it has its own network
// namespace; the test's side is .1.
const podAddr = "10.231.7.2"

// startPod lays out the image tree and the fixtures, starts the pod and
// waits until the host in it is ready.
func startPod(t *testing.T, spec podSpec) *pod {
	t.Helper()
	root, err := os.MkdirTemp("", "plexporter-pod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	for _, d := range []string{"", "usr", "usr/bin", "usr/lib", "usr/lib/plexporter", "usr/lib/plexporter/plugins", "etc", "etc/plexporter", "etc/plexporter/plugins.d",
		"run", "run/plexporter", "host", "host/sys", "host/proc", "proc", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(root, d), 0o755)
	}
	copyFile(t, filepath.Join(binDir, "plexporter"), filepath.Join(root, "usr/bin/plexporter"), 0o755)
	bins, _ := filepath.Glob(filepath.Join(binDir, "shipped", "plexporter-*"))
	for _, b := range bins {
		name := strings.TrimPrefix(filepath.Base(b), "plexporter-")
		copyFile(t, b, filepath.Join(root, "usr/lib/plexporter/plugins", filepath.Base(b)), 0o755)
		copyFile(t, filepath.Join("..", "plugins", name, "plexporter-"+name+".yaml"), filepath.Join(root, "usr/lib/plexporter/plugins", "plexporter-"+name+".yaml"), 0o644)
	}
	copyFile(t, "../deploy/image/passwd", filepath.Join(root, "etc/passwd"), 0o644)
	copyFile(t, "../deploy/image/group", filepath.Join(root, "etc/group"), 0o644)
	if err := os.WriteFile(filepath.Join(root, "etc/plexporter/plexporter.yml"), []byte(spec.config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "dev/null"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The fixtures' RDMA devices and NVMe controllers, without their
	// netdevs: class/net is the node's.
	tree := demoTree(t)
	if err := os.RemoveAll(filepath.Join(tree.Sysfs, "class", "net")); err != nil {
		t.Fatal(err)
	}

	listen := freePort(t)
	url := "http://" + listen
	if !spec.hostNetwork {
		listen, url = ":9880", "http://"+podAddr+":9880"
	}
	init, _ := json.Marshal(podInit{Root: root, Fixture: tree.Sysfs, Caps: spec.caps, Args: []string{
		"--path.sysfs=/host/sys", "--path.procfs=/host/proc", // no --path.rootfs: no shipped plugin reads it
		"--config.file=/etc/plexporter/plexporter.yml", "--web.listen-address=" + listen,
	}})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), podInitEnv+"="+string(init))
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID)
	if !spec.hostNetwork {
		flags |= syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	start, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{url: url, logs: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(minWait):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("pod log:\n%s", p.logs.String())
		}
	})
	if !spec.hostNetwork {
		pid := fmt.Sprint(cmd.Process.Pid)
		t.Cleanup(func() { exec.Command("ip", "link", "del", "plexpod0").Run() })
		for _, args := range [][]string{
			{"ip", "link", "add", "plexpod0", "type", "veth", "peer", "name", spec.nic, "netns", pid},
			{"ip", "addr", "add", "10.231.7.1/30", "dev", "plexpod0"},
			{"ip", "link", "set", "plexpod0", "up"},
			{"nsenter", "-t", pid, "-n", "ip", "addr", "add", podAddr + "/30", "dev", spec.nic},
			{"nsenter", "-t", pid, "-n", "ip", "link", "set", spec.nic, "up"},
			{"nsenter", "-t", pid, "-n", "ip", "link", "set", "lo", "up"},
		} {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	io.WriteString(start, "go\n")
	deadline := time.Now().Add(minWait)
	for {
		resp, err := http.Get(p.url + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case <-done:
			t.Fatalf("the pod exited before its host was ready:\n%s", p.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod's host is not ready after %v:\n%s", minWait, p.logs.String())
		}
	}
}

func (p *pod) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	h := &host{t: t, url: p.url}
	h.scrape("") // a first scrape: counters of failed reads exist from the second on
	_, mfs := h.scrape("")
	return mfs
}

// nodeNIC is a netdev of the node with a device link (a NIC, not lo, veth
// or a bridge): what ethtool reads with its default require_device.
func nodeNIC(t *testing.T) string {
	t.Helper()
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		if _, err := os.Lstat(filepath.Join("/sys/class/net", e.Name(), "device")); err == nil {
			return e.Name()
		}
	}
	return ""
}

// driverStats returns the stat names ethtool exported for netdev.
func driverStats(mfs map[string]*dto.MetricFamily, netdev string) []string {
	var out []string
	for _, m := range mfs["ethtool_driver_stat_total"].GetMetric() {
		l := labels(m)
		if l["netdev"] == netdev {
			out = append(out, l["stat"])
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// collectErrors returns the host's collect-error counters of plugin, by
// collector.
func collectErrors(mfs map[string]*dto.MetricFamily, plugin string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs["plexporter_plugin_collect_errors_total"].GetMetric() {
		if l := labels(m); l["plugin"] == plugin {
			out[l["collector"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

// What every plugin reads in a pod, with and without the node's network
// namespace: rdma and nvme read the node's sysfs wherever the network is;
// nfs reads the node's mounts and sockets through /host/proc/1 in either;
// ethtool reads the NICs of the namespace it runs in, so without
// hostNetwork it reads the pod's own interface under the node NIC's name.
func TestContainerLayouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pods need root (CI runs as root)")
	}
	caps := podCapabilities(t)
	nic := nodeNIC(t)
	for _, layout := range []struct {
		name        string
		hostNetwork bool
	}{{"hostNetwork", true}, {"own network namespace", false}} {
		t.Run(layout.name, func(t *testing.T) {
			p := startPod(t, podSpec{hostNetwork: layout.hostNetwork, caps: caps, config: podConfig, nic: orDefault(nic, "eth0")})
			mfs := p.scrape(t)
			for _, name := range []string{"rdma", "ethtool", "nfs", "nvme"} {
				if value(mfs, "plexporter_plugin_up", "plugin", name) != 1 || value(mfs, "plexporter_plugin_sandboxed", "plugin", name) != 1 {
					t.Errorf("%s: not up and sandboxed in the pod", name)
				}
			}
			// rdma and nvme: the node's sysfs at /host/sys, in any network.
			// 6: the fixture's 5 and the demo's second RoCE port (mlx5_3,
			// 802.3x pause on, internal/dev/demo/demotree).
			if n := count(mfs, "rdma_port_info", "netdev", "ens1f0np0"); n != 1 || len(mfs["rdma_port_info"].GetMetric()) != 6 {
				t.Errorf("rdma: %d ports, want the demo tree's 6", len(mfs["rdma_port_info"].GetMetric()))
			}
			if len(mfs["rdma_port_rcv_data_total"].GetMetric()) == 0 {
				t.Error("rdma: no port counters through /host/sys")
			}
			if len(mfs["nvme_info"].GetMetric()) != 3 {
				t.Errorf("nvme: %d controllers, want the fixture's 3", len(mfs["nvme_info"].GetMetric()))
			}
			for _, plugin := range []string{"rdma", "nvme", "nfs"} {
				if errs := collectErrors(mfs, plugin); len(errs) > 0 {
					t.Errorf("%s: collect errors in the pod: %v", plugin, errs)
				}
			}
			// nfs: the node's init's mounts (no NFS here: no volume) and
			// sockets, read without an error.
			if value(mfs, "nfs_collection_errors_total", "collector", "mountstats") != 0 || value(mfs, "nfs_collection_errors_total", "collector", "tcp") != 0 {
				t.Error("nfs: cannot read /host/proc/1/mountstats or its net/tcp")
			}
			// ethtool: the namespace's own NICs.
			if nic == "" {
				t.Log("the node has no NIC with a device link: ethtool's reads are not checked")
				return
			}
			stats := driverStats(mfs, nic)
			t.Logf("ethtool read %d driver statistics of %s: %s", len(stats), nic, strings.Join(stats[:min(len(stats), 6)], " "))
			switch {
			case layout.hostNetwork && (len(stats) == 0 || slices.Contains(stats, "peer_ifindex")):
				t.Errorf("ethtool with hostNetwork: %s's statistics are %v, want the node NIC's", nic, stats)
			case !layout.hostNetwork && !slices.Contains(stats, "peer_ifindex"):
				t.Errorf("ethtool in its own network namespace: %s's statistics are %v, want the pod's veth (peer_ifindex) read under the node NIC's name", nic, stats)
			}
			if errs := collectErrors(mfs, "ethtool"); len(errs) > 0 {
				t.Errorf("ethtool: collect errors: %v", errs)
			}
		})
	}
}

// The pod needs its plugins' capabilities: without CAP_DAC_READ_SEARCH in
// its bounding set the plugins granted it (nvme; nfs, as the storage-client
// role grants it) are refused with the reason, the others run. And nfs
// granted the node's mountstats path without that capability is denied
// reading it (mode 0400 root), a collect error.
func TestContainerNeedsThePluginsCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pods need root (CI runs as root)")
	}
	caps := slices.DeleteFunc(podCapabilities(t), func(c string) bool { return c == "DAC_READ_SEARCH" })
	p := startPod(t, podSpec{hostNetwork: true, caps: caps, config: podConfig})
	mfs := p.scrape(t)
	for name, refused := range map[string]float64{"nfs": 1, "nvme": 1, "rdma": -1, "ethtool": -1} {
		if v := value(mfs, "plexporter_plugin_refused", "plugin", name); v != refused {
			t.Errorf("%s: plexporter_plugin_refused = %v, want %v", name, v, refused)
		}
	}
	if !strings.Contains(p.logs.String(), "manifest grants CAP_DAC_READ_SEARCH but the host does not have it") {
		t.Error("the refusal does not name the missing capability")
	}

	noCap := strings.Replace(podConfig, "      capabilities: [CAP_DAC_READ_SEARCH]\n", "", 1)
	p = startPod(t, podSpec{hostNetwork: true, caps: podCapabilities(t), config: noCap})
	mfs = p.scrape(t)
	if collectErrors(mfs, "nfs")["mountstats"] < 1 || !strings.Contains(p.logs.String(), "/host/proc/1/mountstats: permission denied") {
		t.Errorf("nfs without CAP_DAC_READ_SEARCH must report that the node's mountstats is denied: %v", collectErrors(mfs, "nfs"))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

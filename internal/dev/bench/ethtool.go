package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ethtoolPairs is how many veth pairs scenario 7 makes (two netdevs each).
const ethtoolPairs = 32

// netnsAddrs maps a listen address to the network namespace (a path under
// /run/netns) its process listens in: the harness dials those from a
// thread switched into the namespace (dialContext), so the exporters and
// their netdevs stay out of the machine's own namespace.
var netnsAddrs sync.Map // addr -> ns path

// dialContext is the harness's dialer: in the namespace netnsAddrs names
// for addr, else an ordinary one.
func dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ns, ok := netnsAddrs.Load(addr)
	if !ok {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The socket is made on this thread, in the namespace, and stays
		// there; then the thread goes back to the harness's namespace. It
		// must not simply exit locked: a process the harness started from
		// this thread would get its parent-death signal.
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, err}
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open(ns.(string), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("open %s: %w", ns, err)}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		done <- result{c, err}
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and exits with the goroutine, in the wrong namespace
	}()
	r := <-done
	return r.c, r.err
}

// benchNetns is a network namespace with veth pairs, deleted by remove.
type benchNetns struct {
	name, path string
	netdevs    []string
}

// newBenchNetns makes the namespace and its pairs (pxb<i>a <-> pxb<i>b,
// up) with one `ip -batch`.
func newBenchNetns(pairs int) (*benchNetns, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("needs root (a network namespace with veth pairs)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("iproute2 `ip` is not installed")
	}
	n := &benchNetns{name: fmt.Sprintf("plexporter-bench-%d", os.Getpid())}
	n.path = filepath.Join("/run/netns", n.name)
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", n.name, err, out)
	}
	var batch strings.Builder
	fmt.Fprintf(&batch, "link set lo up\n")
	for i := range pairs {
		a, b := fmt.Sprintf("pxb%da", i), fmt.Sprintf("pxb%db", i)
		fmt.Fprintf(&batch, "link add %s type veth peer name %s\nlink set %s up\nlink set %s up\n", a, b, a, b)
		n.netdevs = append(n.netdevs, a, b)
	}
	cmd := exec.Command("ip", "-n", n.name, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		n.remove()
		return nil, fmt.Errorf("ip -n %s -batch: %v: %s", n.name, err, out)
	}
	return n, nil
}

func (n *benchNetns) remove() { _ = exec.Command("ip", "netns", "del", n.name).Run() }

// inNetns returns bin and args as a command that runs in the namespace
// (`ip netns exec` also mounts a sysfs of the namespace on /sys, so
// /sys/class/net lists its netdevs; it execs, so the pid is bin's).
func (n *benchNetns) command(bin string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.name, bin}, args...)
}

// scenarioEthtool is scenario 7: the ethtool plugin's cost per netdev
// against node_exporter's ethtool collector, on the same veth pairs.
func (h *harness) scenarioEthtool() error {
	sec := &section{id: "7", title: fmt.Sprintf("ethtool: plexporter-ethtool vs node_exporter --collector.ethtool (%d veth netdevs)", 2*ethtoolPairs)}
	defer h.report.add(sec)
	plugin := h.versusPlugin(sec, "ethtool")
	if plugin == "" {
		return nil
	}
	ns, err := newBenchNetns(ethtoolPairs)
	if err != nil {
		sec.skipped = err.Error() + "."
		return nil
	}
	queued := false // then finishVersus removes the namespace
	defer func() {
		if !queued {
			ns.remove()
		}
	}()
	sec.text = append(sec.text, fmt.Sprintf("Netdevs: %d veth pairs (%d netdevs, %s … %s) and `lo` in a private network namespace; "+
		"both exporters run in it (`ip netns exec`, which mounts the namespace's sysfs on `/sys`) and the harness dials "+
		"them there. plexporter: the host with only the ethtool plugin, sandboxed, `{driver_stats: true, require_device: "+
		"false}` (every driver statistic, as node_exporter exports them; veths have no `device` link), standard "+
		"statistics on as shipped (veth has none: its STATS_GET answer is empty, pause and FEC are EOPNOTSUPP, which the "+
		"plugin does not ask again for 5 minutes). node_exporter: "+
		"`--collector.disable-defaults --collector.ethtool`. Both read the statistics with the SIOCETHTOOL ioctl.",
		ethtoolPairs, 2*ethtoolPairs, ns.netdevs[0], ns.netdevs[len(ns.netdevs)-1]))
	vr, err := h.versus(sec, "ethtool", hostSpec{
		plugins: map[string]string{"ethtool": plugin},
		config:  "  ethtool: {config: {driver_stats: true, require_device: false}}\n",
		args:    []string{"--log.level=warn"},
		netns:   ns,
	}, []string{"--collector.disable-defaults", "--collector.ethtool"}, "ethtool_", "node_ethtool_")
	if err != nil {
		return err
	}
	vr.cleanup, queued = ns.remove, true
	netdevs := float64(len(ns.netdevs))
	vr.finish = func(vr *versusRun, head paceResult) {
		vr.sec.text = append(vr.sec.text, fmt.Sprintf("Per netdev at %s: plexporter %.1f µs CPU (%.1f µs of it in the plugin), node_exporter %.1f µs CPU.",
			head.pace, head.P.CPU()/netdevs*1e6, (head.P.CPU()-head.P.HostCPU())/netdevs*1e6, head.N.CPU()/netdevs*1e6))
		h.report.info("7", fmt.Sprintf("ethtool, %d veth netdevs: report the CPU ratio (no target)", len(ns.netdevs)),
			"node_exporter / plexporter CPU = "+paceRatios(vr.results, h.headline()))
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// netnsFixture is a private network namespace with a veth pair va<->vb, vb
// enslaved to bridge br0. It is deleted when the test ends.
type netnsFixture struct {
	name string
	fd   int
}

func newNetns(t *testing.T) *netnsFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 `ip` not installed")
	}
	name := fmt.Sprintf("plexp-ethtool-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "va", "type", "veth", "peer", "name", "vb"},
		{"link", "add", "br0", "type", "bridge"},
		{"link", "set", "vb", "master", "br0"},
		{"addr", "add", "10.213.0.1/24", "dev", "va"},
		{"link", "set", "va", "up"},
		{"link", "set", "vb", "up"},
		{"link", "set", "br0", "up"},
		// A static neighbour so packets to .3 leave through va without ARP.
		{"neigh", "add", "10.213.0.3", "lladdr", "02:00:00:00:00:03", "dev", "va", "nud", "permanent"},
	} {
		ip(append([]string{"-n", name}, args...)...)
	}
	fd, err := unix.Open(filepath.Join("/run/netns", name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &netnsFixture{name: name, fd: fd}
}

// in runs fn on a thread switched into the namespace; sockets made there
// stay in it.
func (n *netnsFixture) in(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// The thread is not unlocked: it exits with the goroutine instead
		// of going back to the pool in the wrong namespace.
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			t.Errorf("setns: %v", err)
			return
		}
		fn()
	}()
	<-done
}

func (n *netnsFixture) socket(t *testing.T, typ int) int {
	t.Helper()
	fd := -1
	n.in(t, func() {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Errorf("socket: %v", err)
		}
	})
	if fd < 0 {
		t.FailNow()
	}
	return fd
}

func (n *netnsFixture) ifindex(t *testing.T, name string) int {
	t.Helper()
	idx := 0
	n.in(t, func() {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		idx = ifc.Index
	})
	return idx
}

// setFeature sets a legacy on/off feature (ETHTOOL_SGRO, ETHTOOL_STSO).
// veth counts received packets only on its NAPI path: that needs GRO on the
// receiver and, for socket traffic, no TSO on the sender.
func setFeature(t *testing.T, fd int, netdev string, cmd, on uint32) {
	t.Helper()
	val := struct{ cmd, data uint32 }{cmd, on}
	s := newIoctlSourceFD(fd)
	if err := s.ethtool(netdev, unsafe.Pointer(&val)); err != nil {
		t.Fatalf("ethtool cmd %#x on %s: %v", cmd, netdev, err)
	}
	runtime.KeepAlive(&val)
}

func statOf(st *driverStats, name string) (uint64, bool) {
	for i, n := range st.Names {
		if n == name {
			return st.Values[i], true
		}
	}
	return 0, false
}

func TestRealKernelVeth(t *testing.T) {
	ns := newNetns(t)
	fd := ns.socket(t, unix.SOCK_DGRAM)
	src := newIoctlSourceFD(fd)
	t.Cleanup(func() { src.Close() })
	setFeature(t, fd, "vb", unix.ETHTOOL_SGRO, 1)
	setFeature(t, fd, "va", unix.ETHTOOL_STSO, 0)
	ctx := context.Background()

	before, err := src.DriverStats(ctx, "vb")
	if err != nil {
		t.Fatalf("vb: %v", err)
	}
	if before.Driver != "veth" {
		t.Errorf("driver = %q", before.Driver)
	}
	if v, ok := statOf(before, "peer_ifindex"); !ok || int(v) != ns.ifindex(t, "va") {
		t.Errorf("peer_ifindex = %d, %v; va has ifindex %d", v, ok, ns.ifindex(t, "va"))
	}
	// A bridge has no driver statistics: no series and no error.
	if st, err := src.DriverStats(ctx, "br0"); err != errNoStats {
		t.Errorf("br0: %v %v, want errNoStats", st, err)
	}
	if _, err := src.DriverStats(ctx, "nosuch0"); err == nil {
		t.Error("missing netdev: no error")
	}

	// Send 200 UDP datagrams va -> vb (to a static neighbour behind vb).
	const n = 200
	udp := ns.socket(t, unix.SOCK_DGRAM)
	defer unix.Close(udp)
	dst := &unix.SockaddrInet4{Port: 9, Addr: [4]byte{10, 213, 0, 3}}
	for range n {
		if err := unix.Sendto(udp, []byte("plexporter ethtool test"), 0, dst); err != nil {
			t.Fatalf("sendto: %v", err)
		}
	}
	after, err := src.DriverStats(ctx, "vb")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := statOf(before, "rx_queue_0_xdp_packets")
	a, ok := statOf(after, "rx_queue_0_xdp_packets")
	if !ok || a-b < n {
		t.Errorf("vb rx_queue_0_xdp_packets moved %d -> %d, want at least +%d", b, a, n)
	}
	if src.stringFetches != 1 {
		t.Errorf("string table fetched %d times for an unchanged netdev, want 1", src.stringFetches)
	}

	// The whole plugin over gRPC, reading the namespace through the same
	// ioctl source (class/net of the host's sysfs cannot list the
	// namespace's netdevs, so a one-entry tree names vb).
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "class", "net", "vb"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newPlugin()
	p.src = src
	p.std = ns.genlSource(t)
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"driver_stats": true, "require_device": false}})
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v errors %v", res.Status, res.Errors)
	}
	got := series(t, res, "ethtool_driver_queue_stat_total")["netdev=vb,queue=0,stat=rx_xdp_packets"]
	if got < float64(a) {
		t.Errorf("plugin reports %v, ioctl read %d before", got, a)
	}
	sdktest.PromtoolClean(t, res.Text(t), promtoolExceptions)
}

// TestIoctlUnprivileged reads a host NIC through the ioctl source. Run the
// test binary as an unprivileged user (README "Privileges") to confirm the
// plugin needs no capability.
func TestIoctlUnprivileged(t *testing.T) {
	nic := hostNIC(t)
	src := newIoctlSource()
	defer src.Close()
	st, err := src.DriverStats(context.Background(), nic)
	if err == errNoStats {
		t.Skipf("%s has no driver statistics", nic)
	}
	if err != nil {
		t.Fatalf("%s (euid %d): %v", nic, os.Geteuid(), err)
	}
	if len(st.Names) == 0 || len(st.Names) != len(st.Values) || st.Driver == "" {
		t.Fatalf("%s: %+v", nic, st)
	}
	t.Logf("%s (%s, euid %d): %d statistics", nic, st.Driver, os.Geteuid(), len(st.Names))
}

// genlSource returns an ethtool-netlink source whose socket lives in the
// namespace; it skips the test when the kernel has no ethtool family.
func (n *netnsFixture) genlSource(t *testing.T) *genlSource {
	t.Helper()
	src := newGenlSourceDial(func() (*genetlink.Conn, error) {
		return genetlink.Dial(&netlink.Config{NetNS: n.fd})
	})
	t.Cleanup(func() { src.Close() })
	if _, err := src.StandardStats(context.Background(), "lo", stdRequest{Groups: 1 << groupEthMAC}); errors.Is(err, errNoStats) {
		t.Skip("kernel has no ethtool generic netlink family")
	} else if err != nil {
		t.Fatalf("lo: %v", err)
	}
	return src
}

// TestRealKernelStandardStats asks the kernel for the standard statistics
// of veth and bridge netdevs through a real generic netlink socket. Neither
// driver implements the eth-*/rmon, pause or FEC statistics ops: the kernel
// answers STATS_GET with the requested groups and no counters (which also
// shows it accepted our group bitset) and PAUSE_GET/FEC_GET with
// EOPNOTSUPP. That must be "no series, no error".
func TestRealKernelStandardStats(t *testing.T) {
	ns := newNetns(t)
	src := ns.genlSource(t)
	ctx := context.Background()
	all := stdRequest{Groups: stdGroupsAllSet, Pause: true, FEC: true}
	for _, n := range []string{"va", "vb", "br0"} {
		before := src.requests
		start := time.Now()
		st, err := src.StandardStats(ctx, n, all)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if !st.empty() {
			t.Errorf("%s: statistics from a driver without the ops: %+v", n, st)
		}
		if len(st.Groups) != stdGroupsKnown {
			t.Errorf("%s: kernel answered groups %v, want all %d requested", n, st.Groups, stdGroupsKnown)
		}
		if got := src.requests - before; got != 3 {
			t.Errorf("%s: %d requests, want STATS, PAUSE and FEC", n, got)
		}
		t.Logf("%s: 3 requests in %v", n, took)
	}
	// Only rmon asked: the kernel returns exactly that group.
	st, err := src.StandardStats(ctx, "vb", stdRequest{Groups: 1 << groupRMON})
	if err != nil || len(st.Groups) != 1 || st.Groups[groupRMON] == nil {
		t.Errorf("rmon only: %+v %v", st, err)
	}
	if _, err := src.StandardStats(ctx, "nosuch0", all); !errors.Is(err, unix.ENODEV) {
		t.Errorf("missing netdev: %v, want ENODEV", err)
	}
	// A kernel error keeps the socket usable.
	if _, err := src.StandardStats(ctx, "va", all); err != nil {
		t.Errorf("after ENODEV: %v", err)
	}

	// The whole plugin over gRPC on the namespace's netdevs.
	root := t.TempDir()
	for _, n := range []string{"va", "vb", "br0"} {
		if err := os.MkdirAll(filepath.Join(root, "class", "net", n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := newPlugin()
	p.std = src
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"rdma": false, "require_device": false}})
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v errors %v", res.Status, res.Errors)
	}
	text := res.Text(t)
	for _, fam := range []string{"ethtool_eth_", "ethtool_rmon_", "ethtool_pause_", "ethtool_fec_"} {
		if strings.Contains(text, fam) {
			t.Errorf("%s series for veth/bridge:\n%s", fam, text)
		}
	}
	if v, ok := series(t, res, "ethtool_collection_errors_total")["collector=standard_stats"]; !ok || v != 0 {
		t.Errorf("standard_stats errors = %v (exported: %v), want 0", v, ok)
	}
	sdktest.PromtoolClean(t, text, promtoolExceptions)
}

// TestStandardStatsHostNIC reads the host's first NIC through ethtool
// netlink. Run the test binary as an unprivileged user (README
// "Privileges") to confirm the GET requests need no capability.
func TestStandardStatsHostNIC(t *testing.T) {
	nic := hostNIC(t)
	src := newGenlSource()
	defer src.Close()
	all := stdRequest{Groups: stdGroupsAllSet, Pause: true, FEC: true}
	st, err := src.StandardStats(context.Background(), nic, all)
	if errors.Is(err, errNoStats) {
		t.Skip("kernel has no ethtool generic netlink family")
	}
	if err != nil {
		t.Fatalf("%s (euid %d): %v", nic, os.Geteuid(), err)
	}
	const rounds = 200
	start := time.Now()
	for range rounds {
		if _, err := src.StandardStats(context.Background(), nic, all); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s (euid %d): %+v; %v per netdev (3 requests)", nic, os.Geteuid(), st, time.Since(start)/rounds)
}

// hostNIC returns the first netdev of this host with a device link (a real
// or virtual NIC, not lo/veth/bridge), skipping the test without one.
func hostNIC(t *testing.T) string {
	t.Helper()
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("/sys/class/net", e.Name(), "device")); err == nil {
			return e.Name()
		}
	}
	t.Skip("no NIC with a device link on this host")
	return ""
}

// newIoctlSourceFD returns a source using fd, a socket that may live in
// another network namespace (the real-kernel test).
func newIoctlSourceFD(fd int) *ioctlSource {
	return &ioctlSource{fd: fd, cache: map[string]*stringTable{}}
}

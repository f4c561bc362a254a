package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fullListener listens on 127.0.0.1 with an accept queue of length 0 and
// fills it with one connection that is never accepted: every further SYN
// to it is dropped, so its clients retransmit their SYNs (measured on this
// kernel: the first retransmission 1 s after connect, the next at 3 s).
func fullListener(t *testing.T) uint16 {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(sa.(*unix.SockaddrInet4).Port)
	filler := dial(t, port)
	t.Cleanup(func() { unix.Close(filler) })
	// The filler completes its handshake into the accept queue.
	deadline := time.Now().Add(waitDeadline)
	for {
		if _, err := unix.Getpeername(filler); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the connection filling port %d's accept queue did not complete", port)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return port
}

// dial starts a non-blocking connect to 127.0.0.1:port.
func dial(t *testing.T, port uint16) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}})
	if err != nil && err != unix.EINPROGRESS {
		t.Fatalf("connect 127.0.0.1:%d: %v", port, err)
	}
	return fd
}

// synRetransmits starts clients connects to each port at once, waits
// until the kernel reports each one's first SYN retransmission (after 1 s)
// and closes it at once, long before the second (3 s later). It returns
// the retransmissions the kernel reported for the clients just before
// closing them (tcpi_total_retrans): the count the plugin must show, one
// per client unless this machine stalled the test for seconds.
func synRetransmits(t *testing.T, clients int, ports ...uint16) int {
	t.Helper()
	open := map[int]bool{}
	for _, p := range ports {
		for range clients {
			open[dial(t, p)] = true
		}
	}
	total := 0
	for deadline := time.Now().Add(waitDeadline); len(open) > 0; time.Sleep(5 * time.Millisecond) {
		for fd := range open {
			info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				t.Fatalf("TCP_INFO: %v", err)
			}
			if info.Total_retrans > 0 {
				unix.Close(fd)
				delete(open, fd)
				total += int(info.Total_retrans)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connects not retransmitted after %s", len(open), waitDeadline)
		}
	}
	return total
}

// waitDeadline bounds every wait of this package's tests for a condition:
// it only matters when the test fails.
const waitDeadline = 60 * time.Second

func testRetransmits(t *testing.T, attach string) {
	requireRoot(t)
	nfsPort, storePort := fullListener(t), fullListener(t)
	_, c := start(t, map[string]any{
		"attach":                 attach,
		"disk":                   false,
		"nfs_servers":            []any{"127.0.0.1"},
		"nfs_ports":              []any{float64(nfsPort)},
		"object_store_endpoints": []any{"127.0.0.1"},
		"object_store_ports":     []any{float64(storePort)},
	})
	before := collect(t, c)
	if got := before.get(t, `ebpf_program_loaded{attach="`+attach+`",program="tcp_retransmit_skb"}`); got != 1 {
		t.Fatalf("tcp_retransmit_skb not running as %s:\n%s", attach, before.errorText())
	}
	nfs := `nfs_tcp_retransmits_total{server="127.0.0.1"}`
	store := `object_store_tcp_retransmits_total{endpoint="127.0.0.1"}`
	// Both exist from the first scrape, at 0.
	if before.get(t, nfs) != 0 || before.get(t, store) != 0 {
		t.Fatalf("retransmissions before any were forced:\n%s", before.text)
	}
	const nfsClients, storeClients = 3, 2
	var wg sync.WaitGroup
	var nfsRetrans, storeRetrans int
	wg.Go(func() { nfsRetrans = synRetransmits(t, nfsClients, nfsPort) })
	wg.Go(func() { storeRetrans = synRetransmits(t, storeClients, storePort) })
	wg.Wait()
	after := collect(t, c)
	// The classes are disjoint: 127.0.0.1 is both an NFS server and an
	// endpoint, but each port belongs to one class.
	if got := after.get(t, nfs); got != float64(nfsRetrans) {
		t.Errorf("%s = %v, want %d (the SYN retransmissions of %d clients)", nfs, got, nfsRetrans, nfsClients)
	}
	if got := after.get(t, store); got != float64(storeRetrans) {
		t.Errorf("%s = %v, want %d (of %d clients)", store, got, storeRetrans, storeClients)
	}
	if got := after.get(t, "ebpf_tcp_destinations{}"); got != 2 {
		t.Errorf("ebpf_tcp_destinations = %v, want 2 (two ports)", got)
	}
	if got := after.get(t, "ebpf_tcp_destinations_evicted_total{}"); got != 0 {
		t.Errorf("evictions %v in a map with room", got)
	}
	if len(after.errors) > 0 {
		t.Errorf("collect errors:\n%s", after.errorText())
	}
}

func TestRetransmitsTPBTF(t *testing.T) { testRetransmits(t, attachTPBTF) }

func TestRetransmitsTracepoint(t *testing.T) {
	requireRoot(t)
	requireTracefs(t)
	testRetransmits(t, attachTracepoint)
}

// TestRetransmitsEviction: with room for one destination, the second
// evicts the first, and the eviction is counted.
func TestRetransmitsEviction(t *testing.T) {
	requireRoot(t)
	a, b := fullListener(t), fullListener(t)
	_, c := start(t, map[string]any{
		"disk":             false,
		"nfs_servers":      []any{"127.0.0.1"},
		"nfs_ports":        []any{float64(a), float64(b)},
		"max_destinations": float64(1),
	})
	synRetransmits(t, 1, a, b)
	s := collect(t, c)
	if got := s.get(t, "ebpf_tcp_destinations{}"); got != 1 {
		t.Errorf("ebpf_tcp_destinations = %v, want 1", got)
	}
	if got := s.get(t, "ebpf_tcp_destinations_evicted_total{}"); got != 1 {
		t.Errorf("ebpf_tcp_destinations_evicted_total = %v, want 1:\n%s", got, s.text)
	}
}

// TestNFSServersFromMounts: the NFS servers come from <procfs>/self/mounts
// when nfs_servers is not set.
func TestNFSServersFromMounts(t *testing.T) {
	requireRoot(t)
	procfs := t.TempDir()
	mounts := "10.1.2.3:/export/vol1 /mnt/a nfs4 rw,relatime,vers=4.2,addr=10.1.2.3,clientaddr=10.0.0.9 0 0\n" +
		"/dev/vda1 / ext4 rw 0 0\n" +
		"[fd00::7]:/vol2 /mnt/b nfs rw,vers=3,addr=fd00::7 0 0\n"
	writeMounts(t, procfs, mounts)
	_, c := startIn(t, map[string]any{"disk": false}, procfs)
	s := collect(t, c)
	for _, key := range []string{`nfs_tcp_retransmits_total{server="10.1.2.3"}`, `nfs_tcp_retransmits_total{server="fd00::7"}`} {
		if got := s.get(t, key); got != 0 {
			t.Errorf("%s = %v, want 0", key, got)
		}
	}
	if got := s.get(t, `ebpf_watched_addresses{class="nfs"}`); got != 2 {
		t.Errorf("watched NFS addresses %v, want 2", got)
	}
	if len(s.errors) > 0 {
		t.Errorf("collect errors:\n%s", s.errorText())
	}
}

func writeMounts(t *testing.T, procfs, mounts string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(procfs, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procfs, "self", "mounts"), []byte(mounts), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMissingTracepoint: forced to classic tracepoints that tracefs does
// not have, every program reports why it does not run, the plugin still
// starts and serves, and each cause is counted once.
func TestMissingTracepoint(t *testing.T) {
	requireRoot(t)
	_, c := start(t, map[string]any{
		"attach":       attachTracepoint,
		"tracefs_path": t.TempDir(), // no events/: every tracepoint is missing
		"nfs_servers":  []any{"192.0.2.1"},
	})
	first := collect(t, c)
	wantErrors(t, first, map[string]string{
		collectorDisk: "tracepoint block/block_rq_issue",
		collectorTCP:  "tracepoint tcp/tcp_retransmit_skb",
	})
	for _, prog := range []string{"block_rq_issue", "block_rq_complete", "tcp_retransmit_skb"} {
		if got := first.get(t, fmt.Sprintf(`ebpf_program_loaded{attach="tracepoint",program=%q}`, prog)); got != 0 {
			t.Errorf("%s loaded without its tracepoint", prog)
		}
	}
	countedOnce(t, first, collect(t, c), collectorDisk, collectorTCP)
}

// TestBadWatchInput: a mounts file that cannot be read and an endpoint
// that does not resolve are each a log line and a counted collection error,
// once per cause; the rest of the watch list still works.
func TestBadWatchInput(t *testing.T) {
	requireRoot(t)
	procfs := t.TempDir() // no self/mounts
	_, c := startIn(t, map[string]any{
		"disk":                   false,
		"object_store_endpoints": []any{"no-such-endpoint.invalid", "192.0.2.10"},
	}, procfs)
	first := collect(t, c)
	wantErrors(t, first, map[string]string{
		collectorNFSServers:  "detect NFS servers: open " + procfs + "/self/mounts",
		collectorObjectStore: "no-such-endpoint.invalid",
	})
	if got := first.get(t, `ebpf_watched_addresses{class="object_store"}`); got != 1 {
		t.Errorf("watched object-store addresses %v, want 1 (192.0.2.10)", got)
	}
	first.get(t, `object_store_tcp_retransmits_total{endpoint="192.0.2.10"}`)
	countedOnce(t, first, collect(t, c), collectorNFSServers, collectorObjectStore)
}

// TestNoNFSServer: a node without NFS mounts (and no nfs_servers) is not
// failing: one log line, no collection error, nothing watched as NFS.
func TestNoNFSServer(t *testing.T) {
	requireRoot(t)
	procfs := t.TempDir()
	writeMounts(t, procfs, "/dev/vda1 / ext4 rw 0 0\n")
	p := newPlugin()
	var logged []string
	p.logf = func(msg string, _ ...any) { logged = append(logged, msg) }
	c := sdktest.Client(t, p, sdktest.Options{Config: map[string]any{"disk": false}, Sysfs: "/sys", Procfs: procfs, Rootfs: "/"})
	t.Cleanup(p.Close)
	s := collect(t, c)
	if len(s.errors) > 0 {
		t.Errorf("collect errors on a node without NFS:\n%s", s.errorText())
	}
	if got := s.get(t, `ebpf_watched_addresses{class="nfs"}`); got != 0 {
		t.Errorf("watched NFS addresses %v, want 0", got)
	}
	if !slices.Contains(logged, "no NFS server to watch") {
		t.Errorf("log lines %q: want one saying there is no NFS server to watch", logged)
	}
}

// wantErrors checks that s reported an error for each collector whose
// message mentions the text.
func wantErrors(t *testing.T, s scrape, want map[string]string) {
	t.Helper()
	for collector, text := range want {
		found := false
		for _, e := range s.errors {
			if e.GetCollector() == collector && strings.Contains(e.GetMessage(), text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s error mentioning %q in:\n%s", collector, text, s.errorText())
		}
	}
}

// countedOnce checks that each collector's error was counted once by the
// first scrape and not again by the second.
func countedOnce(t *testing.T, first, second scrape, collectors ...string) {
	t.Helper()
	for _, collector := range collectors {
		key := fmt.Sprintf(`ebpf_collection_errors_total{collector=%q}`, collector)
		if first.get(t, key) != 1 || second.get(t, key) != 1 {
			t.Errorf("%s: %v then %v, want 1 and 1", key, first.get(t, key), second.get(t, key))
		}
	}
	if len(second.errors) != 0 {
		t.Errorf("the second scrape repeats errors:\n%s", second.errorText())
	}
}

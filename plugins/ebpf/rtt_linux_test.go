package main

import (
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// pingServer echoes every byte it reads, on 127.0.0.1.
func pingServer(t testing.TB) uint16 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// pings makes n 1-byte round trips on one connection to port and returns
// the longest, as the test saw it (write to echo read).
func pings(t testing.TB, port uint16, n int) (slowest time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := []byte{1}
	for range n {
		start := time.Now()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, b); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
	}
	return slowest
}

// testRTT: round trips to 127.0.0.1 watched as an NFS server on the test
// server's port each receive at least one segment (the echo), so the
// histogram counts at least that many samples, all of a loopback RTT
// (below 2^-10 s); the same traffic to a port that is not watched counts
// nothing.
func testRTT(t *testing.T, attach string) {
	requireRoot(t)
	const n = 50
	watched, other := pingServer(t), pingServer(t)
	_, c := start(t, map[string]any{
		"attach":          attach,
		"disk":            false,
		"tcp_retransmits": false,
		"nfs_latency":     false,
		"tcp_rtt":         true,
		"nfs_servers":     []any{"127.0.0.1"},
		"nfs_ports":       []any{float64(watched)},
	})
	before := collect(t, c)
	if got := before.get(t, `ebpf_program_loaded{attach="`+attach+`",program="tcp_probe"}`); got != 1 {
		t.Fatalf("tcp_probe not running as %s:\n%s", attach, before.errorText())
	}
	pings(t, other, n)
	mid := collect(t, c)
	key := `nfs_tcp_rtt_seconds_count{server="127.0.0.1"}`
	if got := mid.or0(key); got != 0 {
		t.Fatalf("%s = %v after traffic to an unwatched port only", key, got)
	}
	slowest := pings(t, watched, n)
	after := collect(t, c)
	count := after.get(t, key)
	t.Logf("%s: %v samples for %d round trips, mean srtt %.1f µs", attach, count, n, after.get(t, `nfs_tcp_rtt_seconds_sum{server="127.0.0.1"}`)/count*1e6)
	if count < n {
		t.Errorf("%s = %v, want at least %d (one echo segment per round trip)", key, count, n)
	}
	// A loopback RTT is microseconds: every sample at or below 2^-10 s,
	// or, when this machine's load made the test's own round trips
	// slower, below the bucket that holds four times the slowest it saw
	// (the kernel's smoothed RTT of the echoes is no longer than the
	// round trips around them). A unit error (srtt_us not shifted, µs
	// taken for ms or s) is a factor of 8 or more beyond either.
	bound := max(1.0/1024, 4*slowest.Seconds())
	le := math.Inf(1)
	for k := range after.samples {
		var v float64
		if _, err := fmt.Sscanf(k, `nfs_tcp_rtt_seconds_bucket{le="%g",server="127.0.0.1"}`, &v); err == nil && v >= bound && v < le {
			le = v
		}
	}
	if got := after.get(t, fmt.Sprintf(`nfs_tcp_rtt_seconds_bucket{le=%q,server="127.0.0.1"}`, fmt.Sprint(le))); got != count {
		t.Errorf("%v of %v samples at or below %v s (the slowest round trip the test saw took %v); a loopback RTT is microseconds", got, count, le, slowest)
	}
	if sum := after.get(t, `nfs_tcp_rtt_seconds_sum{server="127.0.0.1"}`); sum <= 0 {
		t.Errorf("RTT sum %v, want positive", sum)
	}
	if len(after.errors) > 0 {
		t.Errorf("collect errors:\n%s", after.errorText())
	}
}

func TestRTTTPBTF(t *testing.T) { testRTT(t, attachTPBTF) }

func TestRTTTracepoint(t *testing.T) {
	requireTracefs(t)
	testRTT(t, attachTracepoint)
}

// BenchmarkRTTProgramCost reports tcp_probe's run time per event from the
// BPF run-time statistics, over 1-byte loopback round trips to a watched
// destination (filter hit, histogram update) and to an unwatched one (the
// cost every other TCP segment of the node pays).
func BenchmarkRTTProgramCost(b *testing.B) {
	for _, attach := range []string{attachTPBTF, attachTracepoint} {
		for _, target := range []string{"watched", "unwatched"} {
			b.Run(attach+"/"+target, func(b *testing.B) {
				requireRoot(b)
				if attach == attachTracepoint {
					requireTracefs(b)
				}
				stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
				if err != nil {
					b.Skipf("BPF run-time statistics: %v", err)
				}
				defer stats.Close()
				watched, other := pingServer(b), pingServer(b)
				p := newPlugin()
				p.logf = func(string, ...any) {}
				c := defaultConfig()
				on := true
				c.Attach, c.TCPRTT, c.NFSServers, c.NFSPorts = attach, &on, []string{"127.0.0.1"}, []uint16{watched}
				if err := c.validate(); err != nil {
					b.Fatal(err)
				}
				p.cfg, p.tracefs, p.watch = c, "/sys/kernel/tracing", newWatchState()
				p.rtt = p.loadGroup(collectorRTT, collectorRTT, func() (*ebpf.CollectionSpec, error) {
					s, err := rttSpec(c.rttBounds, c.MaxDestinations)
					return s, err
				})
				if p.rtt == nil {
					b.Fatalf("tcp_probe not running as %s: %v", attach, p.pending)
				}
				defer p.Close()
				p.refreshLocked(b.Context())
				port := watched
				if target == "unwatched" {
					port = other
				}
				b.ResetTimer()
				pings(b, port, b.N)
				b.StopTimer()
				s, err := p.rtt.coll.Programs[rttVariants[attach].hooks[0].program].Stats()
				if err != nil {
					b.Fatal(err)
				}
				if s.RunCount == 0 {
					b.Fatal("tcp_probe never ran")
				}
				b.ReportMetric(float64(s.Runtime.Nanoseconds())/float64(s.RunCount), "tcp_probe-ns/event")
			})
		}
	}
}

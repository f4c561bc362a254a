package main

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// echoServer accepts on 127.0.0.1 and answers each connection's request
// of reqSize bytes with respSize bytes.
func echoServer(t *testing.T, reqSize, respSize int) uint16 {
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
				if _, err := io.ReadFull(c, make([]byte, reqSize)); err != nil {
					return
				}
				c.Write(make([]byte, respSize))
			}()
		}
	}()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func testConnections(t *testing.T, attach string) {
	requireRoot(t)
	const clients, reqSize, respSize = 7, 3000, 50000
	port := echoServer(t, reqSize, respSize)
	_, c := start(t, map[string]any{
		"group_attach":           map[string]any{"object_store_connections": attach},
		"disk":                   false,
		"tcp_retransmits":        false,
		"nfs_servers":            []any{"192.0.2.1"},
		"object_store_endpoints": []any{"127.0.0.1"},
		"object_store_ports":     []any{float64(port)},
	})
	before := collect(t, c)
	if !connModeRuns(t, before, attach) {
		return
	}
	ep := `{endpoint="127.0.0.1"}`
	if before.get(t, "object_store_connections_total"+ep) != 0 {
		t.Fatalf("connections before the test made any:\n%s", before.text)
	}
	for range clients {
		conn, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(make([]byte, reqSize)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, make([]byte, respSize)); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	after := collect(t, c)
	for key, want := range map[string]float64{
		"object_store_connections_total" + ep:                                            clients,
		"object_store_connection_latency_seconds_count" + ep:                             clients,
		"object_store_bytes_sent_total" + ep:                                             clients * reqSize,
		"object_store_bytes_received_total" + ep:                                         clients * respSize,
		`object_store_connection_latency_seconds_bucket{endpoint="127.0.0.1",le="+Inf"}`: clients,
	} {
		if got := after.get(t, key); got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	// A loopback handshake takes microseconds: all in the first bucket
	// (2^-10 s), and the latency sum positive and below a second.
	if got := after.get(t, `object_store_connection_latency_seconds_bucket{endpoint="127.0.0.1",le="0.0009765625"}`); got != clients {
		t.Errorf("%v connections in the first bucket, want %d", got, clients)
	}
	if sum := after.get(t, "object_store_connection_latency_seconds_sum"+ep); sum <= 0 || sum >= 1 {
		t.Errorf("latency sum %v s", sum)
	}
	if len(after.errors) > 0 {
		t.Errorf("collect errors:\n%s", after.errorText())
	}
}

func TestConnectionsTPBTF(t *testing.T) { testConnections(t, attachTPBTF) }

// TestConnectionsFentry and TestConnectionsKprobe: the modes for kernels
// before 6.3 count exactly what the tracepoint modes count where the
// kernel lets them run, and where it does not (this development machine:
// fentry EPERM at load, neither the kprobe PMU nor kprobe_events) fail
// cleanly: every program of the mode 0, one collection error naming the
// group and the mode's reason, and the plugin serves.
func TestConnectionsFentry(t *testing.T) { testConnections(t, attachFentry) }
func TestConnectionsKprobe(t *testing.T) { testConnections(t, attachKprobe) }

// connModeRuns reports whether the connection group runs as attach in s;
// when it does not, it checks that it failed cleanly (the modes that may
// be missing from a kernel: fentry and kprobe) and skips.
func connModeRuns(t *testing.T, s scrape, attach string) bool {
	t.Helper()
	programs := connVariants[attach].programs()
	running := 0
	for _, ev := range programs {
		running += int(s.get(t, `ebpf_program_loaded{attach="`+attach+`",program="`+ev+`"}`))
	}
	if running == len(programs) {
		return true
	}
	if running != 0 {
		t.Fatalf("%d of %d programs run as %s: a variant loads whole or not at all", running, len(programs), attach)
	}
	if attach == attachTPBTF || attach == attachTracepoint {
		t.Fatalf("connection programs not running as %s:\n%s", attach, s.errorText())
	}
	if len(s.errors) != 1 || s.errors[0].GetCollector() != collectorConnections || !strings.Contains(s.errors[0].GetMessage(), attach+": ") {
		t.Fatalf("the failed %s mode should be one %s error naming it, got:\n%s", attach, collectorConnections, s.errorText())
	}
	if got := s.get(t, "ebpf_collection_errors_total{collector=\""+collectorConnections+"\"}"); got != 1 {
		t.Errorf("ebpf_collection_errors_total{collector=%q} = %v, want 1", collectorConnections, got)
	}
	t.Logf("this kernel cannot run the %s mode; it failed cleanly: %s", attach, s.errors[0].GetMessage())
	return false
}

// TestFunctionModesFallBack: the fentry and kprobe variants tried first
// (as auto tries them after the tracepoints on a kernel before 6.3) each
// either run or fail with a log line naming the mode and why, and the
// next one is tried; tp_btf, last here, runs on this machine when neither
// does.
func TestFunctionModesFallBack(t *testing.T) {
	requireRoot(t)
	spec, err := connSpec(defaultConnBounds())
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	logf := func(msg string, args ...any) {
		logged = append(logged, fmt.Sprint(append([]any{msg}, args...)...))
		t.Log(append([]any{msg}, args...)...)
	}
	order := []variant{connVariants[attachFentry], connVariants[attachKprobe], connVariants[attachTPBTF]}
	p, states, err := loadGroup("object_store_connections", spec, order, "/sys/kernel/tracing", nil, logf)
	if err != nil {
		t.Fatalf("no mode ran: %v", err)
	}
	defer p.Close()
	failed := slices.IndexFunc(order, func(v variant) bool { return v.attach == p.attach })
	if len(logged) != failed+1 {
		t.Fatalf("%d log lines for %d failed modes and the one running (%s): %q", len(logged), failed, p.attach, logged)
	}
	for i, v := range order[:failed] {
		if !strings.Contains(logged[i], "not running in this mode") || !strings.Contains(logged[i], v.attach) || !strings.Contains(logged[i], "error") {
			t.Errorf("log line %d %q: want the %s mode's failure and its error", i, logged[i], v.attach)
		}
	}
	if !strings.Contains(logged[failed], "ebpf programs running") {
		t.Errorf("last log line %q, want the running mode", logged[failed])
	}
	// One state per program and mode: 1 for the running mode's only.
	want := 0
	for _, v := range order {
		want += len(v.programs())
	}
	if len(states) != want {
		t.Errorf("%d states, want %d (every program of every mode): %+v", len(states), want, states)
	}
	for _, s := range states {
		if s.loaded != (s.attach == p.attach) {
			t.Errorf("state %+v with %s running", s, p.attach)
		}
	}
	t.Logf("running as %s after %d failed modes", p.attach, failed)
}

func TestConnectionsTracepoint(t *testing.T) {
	requireRoot(t)
	requireTracefs(t)
	testConnections(t, attachTracepoint)
}

// TestExpositionIsClean runs every group's output, with data in each, past
// promtool check metrics and promlint.
func TestExpositionIsClean(t *testing.T) {
	requireRoot(t)
	_, path := loopDevice(t)
	port := echoServer(t, 10, 10)
	_, c := start(t, map[string]any{
		"nfs_servers":            []any{"127.0.0.1"},
		"object_store_endpoints": []any{"127.0.0.1"},
		"object_store_ports":     []any{float64(port)},
		"tcp_rtt":                true,
	})
	directIO(t, path, 3, 3)
	conn, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		t.Fatal(err)
	}
	conn.Write(make([]byte, 10))
	io.ReadFull(conn, make([]byte, 10))
	conn.Close()
	s := collect(t, c)
	for _, family := range []string{"disk_write_latency_seconds_count", "object_store_connections_total", "nfs_tcp_retransmits_total", "object_store_tcp_rtt_seconds_count", "ebpf_program_loaded"} {
		if !strings.Contains(s.text, family) {
			t.Fatalf("no %s in:\n%s", family, s.text)
		}
	}
	sdktest.PromtoolClean(t, s.text, nil) // no seed name draws a finding
	for _, p := range sdktest.Lint(t, s.text) {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

package main

import (
	"io"
	"net"
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
		"attach":                 attach,
		"disk":                   false,
		"tcp_retransmits":        false,
		"nfs_servers":            []any{"192.0.2.1"},
		"object_store_endpoints": []any{"127.0.0.1"},
		"object_store_ports":     []any{float64(port)},
	})
	before := collect(t, c)
	for _, ev := range []string{"inet_sock_set_state", "sock_send_length", "sock_recv_length"} {
		if got := before.get(t, `ebpf_program_loaded{attach="`+attach+`",program="`+ev+`"}`); got != 1 {
			t.Fatalf("%s not running as %s:\n%s", ev, attach, before.errorText())
		}
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

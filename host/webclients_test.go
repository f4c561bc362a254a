package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stalledClient sends one GET for the metrics path and never reads the
// answer, with a receive buffer as small as the kernel allows, so the host's
// writes block once the socket buffers are full.
func stalledClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	return stalledClientWith(t, addr, "")
}

// stalledClientWith is stalledClient sending extra header lines (each
// ending in \r\n).
func stalledClientWith(t *testing.T, addr, headers string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\n%s\r\n", addr, headers); err != nil {
		t.Fatal(err)
	}
	return c
}

// Clients that ask for /metrics and never read must not hold the
// --web.max-requests slots for longer than one scrape timeout: before the
// write deadline, five such clients made every other scrape a 503 for as
// long as they kept their connections open.
func TestStalledClientsDoNotStarveScrapes(t *testing.T) {
	// 200k series: ~8 MB of text, more than loopback socket buffers hold
	// (the host's send buffer autotunes up to tcp_wmem's 4 MiB). The
	// timeout leaves a loaded CI machine time to collect them all: a
	// collect cut short would fit in the buffers and stall nobody.
	h := startHost(t, []string{"big"}, "  big:\n    max_series: 1000000\n    config: {series: 200000}\n", "--web.max-requests=5", "--scrape.timeout=3s")
	addr := strings.TrimPrefix(h.url, "http://")
	var stalled []net.Conn
	for range 5 {
		stalled = append(stalled, stalledClient(t, addr))
	}
	// Each stalled client holds a slot once its response has started:
	// read just the status line, leaving megabytes unread behind it.
	for i, c := range stalled {
		c.SetReadDeadline(time.Now().Add(minWait))
		status := make([]byte, len("HTTP/1.1 200"))
		if _, err := io.ReadFull(c, status); err != nil || string(status) != "HTTP/1.1 200" {
			t.Fatalf("stalled client %d: status %q, %v; want its response under way", i, status, err)
		}
	}
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("with every slot held by a stalled client a scrape got %d, want 503 (the test's premise)", resp.StatusCode)
	}
	began := time.Now()
	var status int
	// The stalled clients never leave (they hold their connections until
	// the test ends): only the host's 3 s write timeout can free a slot, so
	// any recovery proves it, and the loop waits for it generously.
	for time.Since(began) < 2*minWait {
		resp, err := http.Get(h.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if status = resp.StatusCode; status == http.StatusOK && err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != http.StatusOK {
		t.Fatalf("scrapes still get %d %v after five stalled clients took every slot (write timeout 3 s)", status, 2*minWait)
	}
	// One write timeout for the stalled writes plus the scrape itself, with
	// a margin no load reaches; still far below "as long as they stay".
	if waited := time.Since(began); waited > minWait {
		t.Errorf("a normal scrape waited %v for the stalled clients' slots", waited)
	}
}

// A query the host cannot parse completely is refused: net/url's lenient
// parser drops a ';' pair (or everything beyond its parameter limit)
// silently, and a scrape that lost its collect[] would serve every plugin.
func TestUnparsableQueryIsRefused(t *testing.T) {
	h := startHost(t, []string{"a", "b"}, "")
	for _, q := range []string{
		"collect[]=a;exclude[]=b",
		"collect[]=a&" + strings.Repeat("x=1&", 10_001),
		"collect[]=%zz",
	} {
		resp, err := http.Get(h.url + "/metrics?" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "bad query") {
			t.Errorf("query %.40q…: %d %q, want 400 naming the bad query", q, resp.StatusCode, body)
		}
	}
	body, _ := h.scrape("?collect[]=a")
	if !strings.Contains(body, `plugin="a"`) || strings.Contains(body, `chaos_collects_total{plugin="b"}`) {
		t.Errorf("collect[]=a must serve plugin a only:\n%.500s", body)
	}
}

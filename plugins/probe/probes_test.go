package main

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// rpcServer is an NFS server on loopback that answers each call with
// reply(xid, call), or not at all when reply returns nil.
func rpcServer(t *testing.T, reply func(xid uint32, call []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				var marker [4]byte
				if _, err := io.ReadFull(conn, marker[:]); err != nil {
					return
				}
				call := make([]byte, binary.BigEndian.Uint32(marker[:])&^rpcLastFragment)
				if _, err := io.ReadFull(conn, call); err != nil {
					return
				}
				out := reply(binary.BigEndian.Uint32(call), call)
				if out == nil {
					io.Copy(io.Discard, conn) // hang until the client gives up
					return
				}
				conn.Write(out)
			}()
		}
	}()
	return ln.Addr().String()
}

// rpcReplyMsg is a record-marked reply: xid, REPLY, reply_stat, an
// AUTH_NONE verifier, accept_stat.
func rpcReplyMsg(xid, replyStat, acceptStat uint32) []byte {
	b := make([]byte, 4)
	for _, v := range []uint32{xid, rpcReply, replyStat, 0, 0, acceptStat} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	binary.BigEndian.PutUint32(b, rpcLastFragment|uint32(len(b)-4))
	return b
}

// nfsOK accepts a NULL call of program 100003 (any version) and records
// the version it was asked for.
func nfsOK(versions chan<- uint32) func(uint32, []byte) []byte {
	return func(xid uint32, call []byte) []byte {
		word := func(i int) uint32 { return binary.BigEndian.Uint32(call[i:]) }
		if word(4) != rpcCall || word(8) != rpcVersion || word(12) != nfsProgram || word(20) != 0 {
			return rpcReplyMsg(xid, rpcMsgAccepted, 1) // PROG_UNAVAIL
		}
		select {
		case versions <- word(16):
		default:
		}
		return rpcReplyMsg(xid, rpcMsgAccepted, rpcSuccess)
	}
}

func TestNFSNull(t *testing.T) {
	versions := make(chan uint32, 1)
	for _, tc := range []struct {
		name  string
		reply func(uint32, []byte) []byte
		want  string // "" for success
	}{
		{"accepted", nfsOK(versions), ""},
		{"program unavailable", func(x uint32, _ []byte) []byte { return rpcReplyMsg(x, rpcMsgAccepted, 1) }, "accept_stat 1"},
		{"denied", func(x uint32, _ []byte) []byte { return rpcReplyMsg(x, 1, 0) }, "call denied"},
		{"another xid", func(x uint32, _ []byte) []byte { return rpcReplyMsg(x+1, rpcMsgAccepted, rpcSuccess) }, "reply for xid"},
		{"a call, not a reply", func(x uint32, c []byte) []byte {
			b := rpcReplyMsg(x, 0, 0)
			binary.BigEndian.PutUint32(b[8:], rpcCall)
			return b
		}, "not a reply"},
		{"huge record", func(uint32, []byte) []byte { return []byte{0x80, 0x10, 0, 0} }, "is not an RPC reply"},
		{"truncated verifier", func(x uint32, _ []byte) []byte {
			b := rpcReplyMsg(x, rpcMsgAccepted, 0)
			binary.BigEndian.PutUint32(b[20:], 64) // a 64-byte verifier that is not there
			return b
		}, "truncated in the verifier"},
		{"no answer", func(uint32, []byte) []byte { return nil }, "i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := rpcServer(t, tc.reply)
			// A reply is awaited as long as a loaded machine needs; only
			// the case without one waits for the deadline to pass.
			timeout := waitDeadline
			if tc.name == "no answer" {
				timeout = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			err := nfsNull(ctx, addr, 4)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("NULL call failed: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("NULL call: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if v := <-versions; v != 4 {
		t.Errorf("the server was asked for NFS version %d, want 4", v)
	}
}

func TestNFSServerOf(t *testing.T) {
	for _, tc := range []struct {
		source string
		opts   map[string]string
		want   nfsServer
		ok     bool
	}{
		{"10.0.5.20:/exports/shared", map[string]string{"addr": "10.0.5.20", "vers": "4.2"}, nfsServer{"10.0.5.20:2049", 4}, true},
		{"filer:/vol", map[string]string{"addr": "10.0.5.21", "vers": "3", "port": "20049"}, nfsServer{"10.0.5.21:20049", 3}, true},
		{"[fd00::5]:/vol", map[string]string{}, nfsServer{"[fd00::5]:2049", 3}, true},
		{"10.0.5.22:/v", map[string]string{"port": "0"}, nfsServer{"10.0.5.22:2049", 3}, true},
		{"nocolon", map[string]string{}, nfsServer{}, false},
	} {
		got, ok := nfsServerOf(tc.source, tc.opts)
		if got != tc.want || ok != tc.ok {
			t.Errorf("nfsServerOf(%q, %v) = %v, %v; want %v, %v", tc.source, tc.opts, got, ok, tc.want, tc.ok)
		}
	}
}

// probeProcfs is a procfs whose mount table has NFS mounts of the given
// servers ("addr port vers" each).
func probeProcfs(t *testing.T, servers ...[3]string) string {
	root := t.TempDir()
	var b strings.Builder
	b.WriteString("22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n")
	for i, s := range servers {
		fmt.Fprintf(&b, "%d 22 0:%d / /mnt/v%d rw,relatime shared:%d - nfs4 %s:/v%d rw,vers=%s,hard,proto=tcp,port=%s,addr=%s\n",
			40+i, 50+i, i, 40+i, s[0], i, s[2], s[1], s[0])
	}
	if err := os.MkdirAll(filepath.Join(root, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "4242", "mountinfo"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("4242", filepath.Join(root, "self")); err != nil {
		t.Fatal(err)
	}
	return root
}

func rounds(p *plugin) uint64 {
	p.mu.Lock()
	pr := p.prober
	p.mu.Unlock()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.rounds
}

// TestProbes runs every probe against servers on loopback: NFS servers from
// the mount table (one healthy, one whose NFS program is unavailable, one
// port nobody listens on), HTTPS endpoints (an object store's 403 is up, a
// 503 is down) and an ICMP echo to 127.0.0.1.
func TestProbes(t *testing.T) {
	good := rpcServer(t, nfsOK(make(chan uint32, 1)))
	unavailable := rpcServer(t, func(x uint32, _ []byte) []byte { return rpcReplyMsg(x, rpcMsgAccepted, 1) })
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	split := func(addr string) (string, string) { h, p, _ := net.SplitHostPort(addr); return h, p }
	gh, gp := split(good)
	uh, up := split(unavailable)
	ch, cp := split(closed)

	forbidden := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer forbidden.Close()
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer failing.Close()

	p := fixturePlugin(t)
	p.probeTransport = forbidden.Client().Transport // trusts the test certificate of both
	proc := probeProcfs(t, [3]string{gh, gp, "4.2"}, [3]string{uh, up, "3"}, [3]string{ch, cp, "4.1"}, [3]string{gh, gp, "4.2"})
	c := sdktest.Client(t, p, sdktest.Options{Procfs: proc, Sysfs: t.TempDir(), Config: map[string]any{
		"probe_interval":  "10s",
		"probe_timeout":   "2s",
		"nfs_probe":       true,
		"https_endpoints": []any{forbidden.URL + "/", failing.URL + "/bucket"},
		"icmp_targets":    []any{"127.0.0.1"},
	}})
	waitFor(t, func() bool { return rounds(p) >= 1 })
	res := sdktest.Collect(t, c, 0)
	text := res.Text(t)
	lint(t, text)
	mustContain(t, text,
		fmt.Sprintf(`probe_success{probe="nfs_null",target=%q} 1`, good),
		fmt.Sprintf(`probe_success{probe="nfs_null",target=%q} 0`, unavailable),
		fmt.Sprintf(`probe_success{probe="nfs_null",target=%q} 0`, closed),
		fmt.Sprintf(`probe_success{probe="https",target=%q} 1`, forbidden.URL+"/"),
		fmt.Sprintf(`probe_success{probe="https",target=%q} 0`, failing.URL+"/bucket"))
	// The server two mounts share is probed once.
	if n := strings.Count(text, fmt.Sprintf(`probe_success{probe="nfs_null",target=%q}`, good)); n != 1 {
		t.Errorf("%s probed %d times in a round, want once", good, n)
	}
	sdktest.Contains(t, text,
		fmt.Sprintf(`probe_duration_seconds{probe="nfs_null",target=%q} `, good),
		fmt.Sprintf(`probe_last_run_timestamp_seconds{probe="https",target=%q} `, forbidden.URL+"/"))

	// ICMP: as root a raw socket works (this machine's ping_group_range
	// may not allow datagram ICMP sockets); otherwise the probe cannot be
	// made, which is a counted error and no series, not a failed target.
	if os.Geteuid() == 0 {
		mustContain(t, text, `probe_success{probe="icmp",target="127.0.0.1"} 1`, `guest_collection_errors_total{collector="probe"} 0`)
	} else {
		sdktest.Lacks(t, text, `probe="icmp"`)
		mustContain(t, text, `guest_collection_errors_total{collector="probe"} 1`)
	}
}

// TestProbeWithoutSocket: a probe that cannot be made at all gets no
// series and one counted partial error.
func TestProbeWithoutSocket(t *testing.T) {
	p := fixturePlugin(t)
	var failures int
	pr := newProber(time.Minute, time.Second, func() ([]probeTarget, error) {
		return []probeTarget{{probeICMP, "10.0.0.1", func(context.Context) error {
			return errNoProbe{fmt.Errorf("no ICMP socket: operation not permitted")}
		}}}, nil
	}, p.log, func() { failures++ })
	pr.round(context.Background())
	results, err := pr.snapshot()
	if len(results) != 0 || failures != 1 || err == nil || !strings.Contains(err.Error(), "icmp probe of 10.0.0.1: no ICMP socket") {
		t.Errorf("results %v, failures %d, error %v", results, failures, err)
	}
	if _, err := pr.snapshot(); err != nil {
		t.Errorf("the failure was reported twice: %v", err)
	}
}

// TestProbeStopCancels: Close does not wait for a probe in flight (a
// server that never answers) to time out.
func TestProbeStopCancels(t *testing.T) {
	hang := rpcServer(t, func(uint32, []byte) []byte { return nil })
	h, port, _ := net.SplitHostPort(hang)
	p := fixturePlugin(t)
	proc := probeProcfs(t, [3]string{h, port, "3"})
	if err := sdktest.Configure(t, p, map[string]any{"nfs_probe": true, "probe_timeout": "30s"}, sdk.Paths{Procfs: proc}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the call is sent and waiting
	start := time.Now()
	p.Close()
	// Half the probe's 30 s timeout: a Close that waited for it would take
	// all of it, and no load makes a cancelled call take 15 s.
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Close took %s with a probe in flight (probe_timeout 30s)", took)
	}
}

// TestNoProbesByDefault: without a configured probe no prober runs and no
// probe series exist.
func TestNoProbesByDefault(t *testing.T) {
	p := fixturePlugin(t)
	res := sdktest.Run(t, p, sdktest.Options{Procfs: probeProcfs(t, [3]string{"10.0.5.20", "2049", "4.2"}), Sysfs: t.TempDir()})
	if p.prober != nil {
		t.Error("a prober runs without a configured probe")
	}
	sdktest.Lacks(t, res.Text(t), "probe_success", `collector="probe"`)
}

// TestNotPermitted: a socket the sandbox refuses is a probe not made, any
// other dial error a failed target.
func TestNotPermitted(t *testing.T) {
	for _, tc := range []struct {
		err     error
		noProbe bool
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EPERM)}, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EACCES)}, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false},
		{context.DeadlineExceeded, false},
		{&url.Error{Op: "Get", URL: "https://x/", Err: x509.SystemRootsError{Err: os.ErrPermission}}, true},
		{&url.Error{Op: "Get", URL: "https://x/", Err: x509.UnknownAuthorityError{}}, false},
		// EACCES that is not the dial: not the sandbox's network rules.
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, false},
	} {
		var none errNoProbe
		if got := errors.As(notPermitted(tc.err), &none); got != tc.noProbe {
			t.Errorf("notPermitted(%v) is a probe not made: %v, want %v", tc.err, got, tc.noProbe)
		}
	}
}

// FuzzCheckNullReply: any reply is an error or a success, never a panic;
// a success is an accepted, executed reply to our xid.
func FuzzCheckNullReply(f *testing.F) {
	f.Add(rpcReplyMsg(7, rpcMsgAccepted, rpcSuccess)[4:], uint32(7))
	f.Add(rpcReplyMsg(7, rpcMsgAccepted, 1)[4:], uint32(7))
	f.Add([]byte{0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, uint32(7))
	f.Fuzz(func(t *testing.T, reply []byte, xid uint32) {
		if checkNullReply(reply, xid) == nil &&
			(binary.BigEndian.Uint32(reply) != xid || binary.BigEndian.Uint32(reply[4:]) != rpcReply || binary.BigEndian.Uint32(reply[8:]) != rpcMsgAccepted) {
			t.Errorf("accepted %x for xid %#x", reply, xid)
		}
	})
}

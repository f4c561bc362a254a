package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Probe kinds: the probe label.
const (
	probeICMP  = "icmp"
	probeNFS   = "nfs_null"
	probeHTTPS = "https"
)

// probeTarget is one probe of a round.
type probeTarget struct {
	probe, target string
	run           func(ctx context.Context) error
}

// probeResult is the latest outcome of one probe.
type probeResult struct {
	probe, target string
	success       bool
	duration      time.Duration
	at            time.Time
}

// errNoProbe marks a probe that could not be made at all (no socket): not a
// failure of the target, so it gets no result, only a counted error.
type errNoProbe struct{ err error }

func (e errNoProbe) Error() string { return e.err.Error() }
func (e errNoProbe) Unwrap() error { return e.err }

// notPermitted turns a socket the sandbox refuses (seccomp: EPERM for an
// IP socket without a network grant; Landlock: EACCES for a port not
// granted) into errNoProbe: the target did not fail, the plugin may not
// reach it.
func notPermitted(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)) {
		return errNoProbe{fmt.Errorf("%w (grant network.inet.tcp_connect for this port in the plugin's manifest; see README.md)", err)}
	}
	// The system's CA certificates unreadable (a sandbox without the
	// manifest's grant of them): the endpoint cannot be judged.
	var roots x509.SystemRootsError
	if errors.As(err, &roots) {
		return errNoProbe{fmt.Errorf("%w (the manifest grants /etc/ssl/certs and /etc/pki read-only; where the CA bundle lives elsewhere, grant that)", err)}
	}
	return err
}

// prober runs the probes every interval from a goroutine and keeps the
// latest results for the scrapes: a probe is a network round trip of up to
// the probe timeout, which a scrape must not wait for.
type prober struct {
	interval, timeout time.Duration
	targets           func() ([]probeTarget, error)
	now               func() time.Time
	log               warner
	failed            func() // called once per counted failure

	mu          sync.Mutex
	results     []probeResult
	lastErr     error
	errSeq      uint64
	reportedSeq uint64
	rounds      uint64

	cancel context.CancelFunc
	done   chan struct{}
}

func newProber(interval, timeout time.Duration, targets func() ([]probeTarget, error), log warner, failed func()) *prober {
	return &prober{interval: interval, timeout: timeout, targets: targets, now: time.Now, log: log, failed: failed, done: make(chan struct{})}
}

// start runs a round at once and then one every interval, until stop.
func (p *prober) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			p.round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stop cancels the probes in flight and waits for the loop.
func (p *prober) stop() {
	p.cancel()
	<-p.done
}

// round runs every probe in parallel, each bounded by the timeout, and
// replaces the results: a target that is gone (an NFS mount unmounted)
// loses its series.
func (p *prober) round(ctx context.Context) {
	targets, err := p.targets()
	if err != nil {
		p.fail(err)
	}
	results := make([]probeResult, len(targets))
	ok := make([]bool, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, p.timeout)
			defer cancel()
			start := p.now()
			err := t.run(pctx)
			if ctx.Err() != nil {
				return // stopping: not the target's fault
			}
			var none errNoProbe
			if errors.As(err, &none) {
				p.fail(fmt.Errorf("%s probe of %s: %w", t.probe, t.target, err))
				return
			}
			results[i] = probeResult{probe: t.probe, target: t.target, success: err == nil, duration: p.now().Sub(start), at: start}
			ok[i] = true
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	kept := results[:0]
	for i, r := range results {
		if ok[i] {
			kept = append(kept, r)
		}
	}
	p.mu.Lock()
	p.results = kept
	p.rounds++
	p.mu.Unlock()
}

func (p *prober) fail(err error) {
	p.failed()
	p.mu.Lock()
	first := p.errSeq == 0 || p.lastErr.Error() != err.Error()
	p.lastErr = err
	p.errSeq++
	p.mu.Unlock()
	if first {
		p.log.Warn("probe not made", "error", err)
	}
}

// snapshot returns the latest results and the latest failure if it has not
// been handed out yet.
func (p *prober) snapshot() ([]probeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var unreported error
	if p.reportedSeq != p.errSeq {
		p.reportedSeq = p.errSeq
		unreported = p.lastErr
	}
	return p.results, unreported
}

// pingICMP sends one ICMP echo request to host and waits for the reply.
// It uses an unprivileged ICMP datagram socket where the kernel allows one
// (the caller's group is in net.ipv4.ping_group_range), else a raw socket,
// which needs CAP_NET_RAW.
func pingICMP(ctx context.Context, host string) error {
	ip, err := resolveOne(ctx, host)
	if err != nil {
		return err
	}
	v4 := ip.To4() != nil
	dgram, raw, proto := "udp6", "ip6:ipv6-icmp", 58
	var echo, reply icmp.Type = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	if v4 {
		dgram, raw, proto = "udp4", "ip4:icmp", 1
		echo, reply = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	}
	var dst net.Addr = &net.UDPAddr{IP: ip}
	conn, err := icmp.ListenPacket(dgram, "")
	if err != nil {
		var rerr error
		if conn, rerr = icmp.ListenPacket(raw, ""); rerr != nil {
			return errNoProbe{fmt.Errorf("no ICMP socket: unprivileged (%v; see net.ipv4.ping_group_range), raw (%v; needs CAP_NET_RAW)", err, rerr)}
		}
		dst = &net.IPAddr{IP: ip}
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	var nonce [8]byte
	rand.Read(nonce[:])
	id, seq := int(binary.BigEndian.Uint16(nonce[:2])), int(binary.BigEndian.Uint16(nonce[2:4]))
	msg := icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: seq, Data: nonce[:]}}
	wb, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	if _, err := conn.WriteTo(wb, dst); err != nil {
		return fmt.Errorf("send echo request to %s: %w", ip, err)
	}
	buf := make([]byte, 1500)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no echo reply from %s: %w", ip, err)
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply {
			continue
		}
		// A raw socket sees every echo reply of the host; match ours by
		// peer, sequence and payload (a datagram socket's ID is the
		// kernel's, not ours).
		e, ok := m.Body.(*icmp.Echo)
		if !ok || e.Seq != seq || string(e.Data) != string(nonce[:]) || !peerIs(peer, ip) {
			continue
		}
		return nil
	}
}

func peerIs(a net.Addr, ip net.IP) bool {
	switch p := a.(type) {
	case *net.UDPAddr:
		return p.IP.Equal(ip)
	case *net.IPAddr:
		return p.IP.Equal(ip)
	}
	return false
}

func resolveOne(ctx context.Context, host string) (net.IP, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip, nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: no address", host)
	}
	return addrs[0].IP, nil
}

// ONC RPC (RFC 5531) constants of the NULL call.
const (
	rpcCall          = 0
	rpcReply         = 1
	rpcVersion       = 2
	rpcMsgAccepted   = 0
	rpcSuccess       = 0
	nfsProgram       = 100003
	rpcLastFragment  = 1 << 31
	rpcMaxReply      = 4096
	defaultNFSPort   = 2049
	defaultNFSMajVer = 3
)

// nfsNull sends the NFS NULL procedure (program 100003, procedure 0,
// AUTH_NONE) over TCP and checks that the server accepted and answered it:
// the cheapest request an NFS server serves, which proves its RPC layer is
// alive, not only its TCP port.
func nfsNull(ctx context.Context, addr string, version uint32) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return notPermitted(err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	var x [4]byte
	rand.Read(x[:])
	xid := binary.BigEndian.Uint32(x[:])
	call := make([]byte, 4, 44)
	for _, v := range []uint32{xid, rpcCall, rpcVersion, nfsProgram, version, 0, 0, 0, 0, 0} {
		call = binary.BigEndian.AppendUint32(call, v)
	}
	binary.BigEndian.PutUint32(call, rpcLastFragment|uint32(len(call)-4))
	if _, err := conn.Write(call); err != nil {
		return fmt.Errorf("send NULL call: %w", err)
	}
	var marker [4]byte
	if _, err := io.ReadFull(conn, marker[:]); err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	n := binary.BigEndian.Uint32(marker[:]) &^ rpcLastFragment
	if n < 24 || n > rpcMaxReply {
		return fmt.Errorf("reply of %d bytes is not an RPC reply", n)
	}
	reply := make([]byte, n)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	word := func(i int) uint32 { return binary.BigEndian.Uint32(reply[i:]) }
	switch {
	case word(0) != xid:
		return fmt.Errorf("reply for xid %#x, sent %#x", word(0), xid)
	case word(4) != rpcReply:
		return fmt.Errorf("message type %d, not a reply", word(4))
	case word(8) != rpcMsgAccepted:
		return fmt.Errorf("call denied (reply_stat %d)", word(8))
	}
	// Skip the verifier: flavor (12), length (16), body padded to 4 bytes.
	vlen := int(word(16))
	off := 20 + (vlen+3)&^3
	if vlen > rpcMaxReply || off+4 > len(reply) {
		return errors.New("reply truncated in the verifier")
	}
	if st := word(off); st != rpcSuccess {
		return fmt.Errorf("call not executed: accept_stat %d (1 program unavailable, 2 version mismatch)", st)
	}
	return nil
}

// nfsServer is an NFS server a mount talks to.
type nfsServer struct {
	addr    string // host:port
	version uint32
}

// nfsServerOf reads the server of an NFS mount from its superblock options
// (addr=, port=, vers=), falling back to the host part of "server:/export"
// and the default port.
func nfsServerOf(source string, opts map[string]string) (nfsServer, bool) {
	host := opts["addr"]
	if host == "" {
		h, _, ok := strings.Cut(source, ":/")
		if !ok || h == "" {
			return nfsServer{}, false
		}
		host = strings.Trim(h, "[]")
	}
	port := defaultNFSPort
	if p, err := strconv.Atoi(opts["port"]); err == nil && p > 0 && p < 65536 {
		port = p
	}
	vers := uint32(defaultNFSMajVer)
	if v := opts["vers"]; v != "" {
		major, _, _ := strings.Cut(v, ".")
		if m, err := strconv.Atoi(major); err == nil && m > 0 {
			vers = uint32(m)
		}
	}
	return nfsServer{addr: net.JoinHostPort(host, strconv.Itoa(port)), version: vers}, true
}

// httpsGet GETs url without following redirects and closes the body. Any
// answer below 500 is a success: the endpoint is reachable and serving (an
// object store answers an anonymous GET with 403); a 5xx is the endpoint
// failing.
func httpsGet(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return notPermitted(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// newProbeClient is the HTTPS client of the probes: no connection reuse
// (each probe measures a whole connection, as a client starting up would
// see it), no redirects.
func newProbeClient(rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}
	}
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

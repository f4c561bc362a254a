package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

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

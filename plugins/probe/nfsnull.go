package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

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
	return checkNullReply(reply, xid)
}

// checkNullReply checks an RPC reply (without its record marker) to the
// NULL call xid: ours, accepted, executed.
func checkNullReply(reply []byte, xid uint32) error {
	if len(reply) < 24 {
		return fmt.Errorf("reply of %d bytes is not an RPC reply", len(reply))
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
	vlen := word(16)
	if vlen > rpcMaxReply {
		return errors.New("reply truncated in the verifier")
	}
	off := 20 + int(vlen+3)&^3
	if off+4 > len(reply) {
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

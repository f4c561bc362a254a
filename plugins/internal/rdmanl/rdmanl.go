// Package rdmanl holds what the plugins speaking RDMA netlink's NLDEV
// client (rdma's counters, attribution's queue pair owners) share: the
// protocol's numbers, the connection they use and the bounded dump
// exchange. The commands each plugin may send, and the decoding of their
// replies, stay in the plugin.
//
// RDMA netlink is plain netlink (NETLINK_RDMA), no generic-netlink header:
// a message's type is the client (RDMA_NL_NLDEV) and the command, and its
// attributes follow the nlmsghdr directly (include/uapi/rdma/rdma_netlink.h).
package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/mdlayher/netlink"
)

const (
	// Family is NETLINK_RDMA, the protocol to netlink.Dial.
	Family = 20
	// ClientNLDEV is RDMA_NL_NLDEV, the client of every device command.
	ClientNLDEV = 5
)

// Type is the message type of NLDEV command op (RDMA_NL_GET_TYPE).
func Type(op int) netlink.HeaderType { return netlink.HeaderType(ClientNLDEV<<10 | op) }

// Conn is the part of *netlink.Conn the plugins use (nltest provides a
// fake one in tests).
type Conn interface {
	Execute(netlink.Message) ([]netlink.Message, error)
	Send(netlink.Message) (netlink.Message, error)
	Receive() ([]netlink.Message, error)
	ReceiveIter() iter.Seq2[netlink.Message, error]
	Close() error
}

// ErrDumpOverflow: a dump's replies passed the caller's receive budget.
var ErrDumpOverflow = errors.New("rdma netlink dump exceeded receive budget")

// DumpAttempts bounds how often a dump is run again when the kernel flags
// it NLM_F_DUMP_INTR: the object list changed while it was being dumped
// (a device or QP came or went), so the parts may be inconsistent. Such a
// dump is never taken as complete; after this many interrupted runs in a
// row the exchange fails with ErrDumpInterrupted.
const DumpAttempts = 3

// ErrDumpInterrupted: every one of DumpAttempts runs of a dump was
// interrupted.
var ErrDumpInterrupted = fmt.Errorf("rdma netlink dump interrupted (NLM_F_DUMP_INTR: the kernel's objects changed during the dump) %d times in a row", DumpAttempts)

// Interrupted tells whether any part of a dump carries NLM_F_DUMP_INTR.
func Interrupted(msgs []netlink.Message) bool {
	for _, m := range msgs {
		if m.Header.Flags&netlink.DumpInterrupted != 0 {
			return true
		}
	}
	return false
}

// DumpWithin runs the dump request req on c, again while it is
// interrupted (at most DumpAttempts runs), and fails with ErrDumpOverflow
// as soon as the replies exceed maxBytes of attributes or maxMsgs
// messages: a dump of queue pairs grows with the node's workload, and
// netlink.Conn.Execute would hold all of it in memory. Stopping the
// iteration makes netlink.Conn read and discard the rest of the dump, so
// the socket is clean for the next request. The caller checks that req is
// a command it may send.
func DumpWithin(ctx context.Context, c Conn, req netlink.Message, maxBytes, maxMsgs int) ([]netlink.Message, error) {
	for range DumpAttempts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, intr, err := receiveWithin(c, req, maxBytes, maxMsgs)
		if err != nil {
			return nil, err
		}
		if !intr {
			return out, ctx.Err()
		}
	}
	return nil, ErrDumpInterrupted
}

// receiveWithin is one run of DumpWithin's exchange; intr reports a part
// flagged NLM_F_DUMP_INTR (the dump is read to its end either way, so the
// socket stays clean).
func receiveWithin(c Conn, req netlink.Message, maxBytes, maxMsgs int) (out []netlink.Message, intr bool, err error) {
	sent, err := c.Send(req)
	if err != nil {
		return nil, false, err
	}
	size := 0
	for m, err := range c.ReceiveIter() {
		if err != nil {
			return nil, false, err
		}
		if err := netlink.Validate(sent, []netlink.Message{m}); err != nil {
			return nil, false, err
		}
		intr = intr || m.Header.Flags&netlink.DumpInterrupted != 0
		if m.Header.Type == netlink.Error {
			continue // an ACK
		}
		size += len(m.Data)
		if size > maxBytes || len(out) >= maxMsgs {
			return nil, false, ErrDumpOverflow
		}
		out = append(out, m)
	}
	return out, intr, nil
}

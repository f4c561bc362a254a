package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"

	"github.com/plexporter/plexporter/plugins/internal/rdmanl"
)

// RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV): plain netlink, no
// generic-netlink header; attributes follow the nlmsghdr directly and are
// read and written with netlink's AttributeDecoder and AttributeEncoder.
const (
	familyRDMA  = 20 // NETLINK_RDMA
	clientNLDEV = 5

	cmdGet           = 1
	cmdPortGet       = 5
	cmdStatGet       = 17
	cmdStatGetStatus = 24

	attrDevIndex             = 1
	attrDevName              = 2
	attrPortIndex            = 3
	attrResQP                = 19
	attrResType              = 26
	attrResPID               = 28
	attrResKernName          = 29
	attrStatMode             = 74
	attrStatRes              = 75
	attrStatAutoModeMask     = 76
	attrStatCounter          = 77
	attrStatCounterEntry     = 78
	attrStatHWCounters       = 80
	attrStatHWCounterEntry   = 81
	attrStatHWCounterName    = 82
	attrStatHWCounterValue   = 83
	attrStatHWCounterIndex   = 94
	attrStatHWCounterDynamic = 95

	counterModeNone   = 0
	counterModeAuto   = 1
	counterModeManual = 2

	autoMaskType = 1
	autoMaskPID  = 2

	// Receive budget of one QP counter dump (rdma_exporter's numbers).
	qpDumpMaxBytes = 1 << 20
	qpDumpMaxMsgs  = 256
)

func nldevType(op int) netlink.HeaderType { return netlink.HeaderType(clientNLDEV<<10 | op) }

const (
	flagsDoit = netlink.Request | netlink.Acknowledge
	flagsDump = netlink.Request | netlink.Acknowledge | netlink.Dump
)

var errDumpOverflow = rdmanl.ErrDumpOverflow

// dumpAttempts bounds how often an interrupted dump (NLM_F_DUMP_INTR) is
// run again before the exchange fails with errDumpInterrupted, a collect
// error (plugins/internal/rdmanl).
const dumpAttempts = rdmanl.DumpAttempts

var errDumpInterrupted = rdmanl.ErrDumpInterrupted

// hwCounter is one STAT_HWCOUNTER_ENTRY.
type hwCounter struct {
	name     string
	value    uint64
	hasValue bool
	index    uint32
	dynamic  bool // carries STAT_HWCOUNTER_DYNAMIC: an optional counter
	enabled  bool // DYNAMIC == 1
}

// decode runs fn over the attributes in b and returns the first decoding
// error: a truncated header, a length past the end, a value of the wrong
// size.
func decode(b []byte, fn func(ad *netlink.AttributeDecoder) error) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	if err := fn(ad); err != nil {
		return err
	}
	return ad.Err()
}

// decodeHWCounters decodes the entries of a STAT_HWCOUNTERS nest.
func decodeHWCounters(nad *netlink.AttributeDecoder) ([]hwCounter, error) {
	var out []hwCounter
	for nad.Next() {
		if nad.Type() != attrStatHWCounterEntry {
			continue
		}
		var c hwCounter
		nad.Nested(func(ead *netlink.AttributeDecoder) error {
			for ead.Next() {
				switch ead.Type() {
				case attrStatHWCounterName:
					c.name = ead.String()
				case attrStatHWCounterValue:
					c.value, c.hasValue = ead.Uint64(), true
				case attrStatHWCounterIndex:
					c.index = ead.Uint32()
				case attrStatHWCounterDynamic:
					c.dynamic, c.enabled = true, ead.Uint8() != 0
				}
			}
			if ead.Err() == nil && c.name == "" {
				return errors.New("hw counter entry without a name")
			}
			return nil
		})
		if nad.Err() != nil {
			return nil, fmt.Errorf("hw counter entry: %w", nad.Err())
		}
		out = append(out, c)
	}
	return out, nil
}

// parseStatReply decodes a STAT_GET / STAT_GET_STATUS reply's counter table.
func parseStatReply(b []byte) ([]hwCounter, error) {
	var out []hwCounter
	err := decode(b, func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			if ad.Type() != attrStatHWCounters {
				continue
			}
			var err error
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				out, err = decodeHWCounters(nad)
				return err
			})
			return nil // the first table is the reply's
		}
		return nil
	})
	return out, err
}

type nlDevice struct {
	index uint32
	name  string
	ports uint32
}

func parseDevice(b []byte) (nlDevice, error) {
	var d nlDevice
	var haveIdx bool
	err := decode(b, func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			switch ad.Type() {
			case attrDevIndex:
				d.index, haveIdx = ad.Uint32(), true
			case attrDevName:
				d.name = ad.String()
			case attrPortIndex:
				d.ports = ad.Uint32()
			}
		}
		return nil
	})
	if err != nil {
		return d, err
	}
	if !haveIdx || d.name == "" {
		return d, errors.New("device message without DEV_INDEX or DEV_NAME")
	}
	return d, nil
}

type qpMode struct {
	mode     uint32
	maskType bool
	maskPID  bool
}

func (m qpMode) name() string {
	switch m.mode {
	case counterModeAuto:
		return "auto"
	case counterModeManual:
		return "manual"
	default:
		return "none"
	}
}

func parseQPMode(b []byte) (qpMode, error) {
	var m qpMode
	var have bool
	err := decode(b, func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			switch ad.Type() {
			case attrStatMode:
				m.mode, have = ad.Uint32(), true
			case attrStatAutoModeMask:
				mask := ad.Uint32()
				m.maskType, m.maskPID = mask&autoMaskType != 0, mask&autoMaskPID != 0
			}
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	if !have {
		return m, errors.New("QP mode reply without STAT_MODE")
	}
	return m, nil
}

// qpSet is one bound counter ("cntn") of a QP counter dump.
type qpSet struct {
	port   uint32
	mode   uint32
	qpType string
	hasPID bool
	stats  map[string]uint64
}

func (s qpSet) autoType() bool { return s.mode == counterModeAuto && s.qpType != "" && !s.hasPID }

var qpTypeNames = []string{"SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN", "RAW_PACKET", "XRC_INI", "XRC_TGT"}

func qpTypeName(t uint8) string {
	if int(t) < len(qpTypeNames) {
		return qpTypeNames[t]
	}
	return fmt.Sprint(t)
}

func parseQPDumpMessage(b []byte) ([]qpSet, error) {
	var out []qpSet
	err := decode(b, func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			if ad.Type() != attrStatCounter {
				continue
			}
			ad.Nested(func(cad *netlink.AttributeDecoder) error {
				for cad.Next() {
					if cad.Type() != attrStatCounterEntry {
						continue
					}
					s := qpSet{stats: map[string]uint64{}}
					cad.Nested(func(ead *netlink.AttributeDecoder) error {
						return decodeQPSet(ead, &s)
					})
					if cad.Err() != nil {
						return nil // returned by ad.Err
					}
					out = append(out, s)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeQPSet(ead *netlink.AttributeDecoder, s *qpSet) error {
	for ead.Next() {
		switch ead.Type() {
		case attrPortIndex:
			s.port = ead.Uint32()
		case attrStatMode:
			s.mode = ead.Uint32()
		case attrResType:
			s.qpType = qpTypeName(ead.Uint8())
		case attrResPID, attrResKernName:
			s.hasPID = true
		case attrStatHWCounters:
			ead.Nested(func(nad *netlink.AttributeDecoder) error {
				hw, err := decodeHWCounters(nad)
				for _, c := range hw {
					if c.hasValue {
						s.stats[c.name] = c.value
					}
				}
				return err
			})
		}
	}
	return nil
}

// nlConn is the part of *netlink.Conn the client uses (nltest provides a
// fake one in tests).
type nlConn = rdmanl.Conn

// nldevClient speaks the read-only part of RDMA_NLDEV. It only ever sends
// GET, STAT_GET and STAT_GET_STATUS: never SET, never STAT_SET.
type nldevClient struct {
	conn nlConn
}

// request builds one request, refusing every command that is not a read.
// The attributes are in the order iproute2 writes them, and the flags are
// iproute2's (doit requests ask for an ACK), so that what the plugin sends
// is byte for byte what `rdma statistic` sends (testdata/nl-real).
func request(op int, flags netlink.HeaderFlags, attrs func(ae *netlink.AttributeEncoder)) (netlink.Message, error) {
	m := netlink.Message{Header: netlink.Header{Type: nldevType(op), Flags: flags}}
	if err := readOnly(m); err != nil {
		return m, err
	}
	if attrs != nil {
		ae := netlink.NewAttributeEncoder()
		attrs(ae)
		var err error
		if m.Data, err = ae.Encode(); err != nil {
			return m, err
		}
	}
	return m, nil
}

// readOnly refuses a message that is not an NLDEV read command; every
// exchange checks it before anything reaches the socket.
func readOnly(m netlink.Message) error {
	client, op := int(m.Header.Type)>>10, int(m.Header.Type)&0x3ff
	switch {
	case client != clientNLDEV:
		return fmt.Errorf("refusing to send RDMA netlink client %d message", client)
	case op == cmdGet, op == cmdPortGet, op == cmdStatGet, op == cmdStatGetStatus:
		return nil
	default:
		return fmt.Errorf("refusing to send RDMA netlink op %d", op)
	}
}

// dataMessages drops the ACKs and NLMSG_DONE a reply may contain (errors
// in them were returned by netlink.Conn).
func dataMessages(msgs []netlink.Message) []netlink.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.Header.Type != netlink.Error && m.Header.Type != netlink.Done {
			out = append(out, m)
		}
	}
	return out
}

// portAttrs selects a device's port.
func portAttrs(dev, port uint32) func(ae *netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrDevIndex, dev)
		ae.Uint32(attrPortIndex, port)
	}
}

// dump runs a dump request to its NLMSG_DONE (netlink.Conn.Execute joins
// the parts and returns the error NLMSG_DONE carries, if any).
func (c *nldevClient) dump(ctx context.Context, req netlink.Message) ([]netlink.Message, error) {
	if err := readOnly(req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for range dumpAttempts {
		msgs, err := c.conn.Execute(req)
		if err != nil {
			return nil, err
		}
		if !rdmanl.Interrupted(msgs) {
			return dataMessages(msgs), nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, errDumpInterrupted
}

// get runs a doit request and returns its one reply. The kernel answers a
// request carrying NLM_F_ACK with the reply and then the ACK, in two
// datagrams; Execute returns after the first, so the ACK is read here, or
// the next request would meet it and fail its sequence check. (nltest's
// fake connection delivers both at once.)
func (c *nldevClient) get(ctx context.Context, req netlink.Message) (netlink.Message, error) {
	if err := readOnly(req); err != nil {
		return netlink.Message{}, err
	}
	if err := ctx.Err(); err != nil {
		return netlink.Message{}, err
	}
	msgs, err := c.conn.Execute(req)
	if err != nil {
		return netlink.Message{}, err
	}
	if len(msgs) == 0 {
		return netlink.Message{}, errors.New("rdma netlink: empty reply")
	}
	if !hasACK(msgs) {
		ack, err := c.conn.Receive()
		if err != nil {
			return netlink.Message{}, err
		}
		req.Header.Sequence = msgs[0].Header.Sequence // as Execute sent it
		if err := netlink.Validate(req, ack); err != nil {
			return netlink.Message{}, err
		}
		if !hasACK(ack) {
			return netlink.Message{}, errors.New("rdma netlink: reply ended without an ACK")
		}
	}
	replies := dataMessages(msgs)
	if len(replies) != 1 {
		return netlink.Message{}, fmt.Errorf("want 1 reply message, got %d", len(replies))
	}
	return replies[0], nil
}

func hasACK(msgs []netlink.Message) bool {
	for _, m := range msgs {
		if m.Header.Type == netlink.Error {
			return true // error 0; other errors were returned by netlink.Conn
		}
	}
	return false
}

// dumpWithin runs a dump request like dump, but fails with errDumpOverflow
// as soon as the replies exceed maxBytes of attributes or maxMsgs messages.
// This is the one exchange the plugin runs itself, because a QP counter
// dump grows with the number of bound QPs and Execute would hold all of it
// in memory. Stopping the iteration makes netlink.Conn read and discard the
// rest of the dump, so the socket is clean for the next request.
func (c *nldevClient) dumpWithin(ctx context.Context, req netlink.Message, maxBytes, maxMsgs int) ([]netlink.Message, error) {
	if err := readOnly(req); err != nil {
		return nil, err
	}
	return rdmanl.DumpWithin(ctx, c.conn, req, maxBytes, maxMsgs)
}

func (c *nldevClient) devices(ctx context.Context) ([]nlDevice, error) {
	req, err := request(cmdGet, flagsDump, nil)
	if err != nil {
		return nil, err
	}
	msgs, err := c.dump(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("device list: %w", err)
	}
	var out []nlDevice
	for _, m := range msgs {
		d, err := parseDevice(m.Data)
		if err != nil {
			return nil, fmt.Errorf("device list: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (c *nldevClient) statOne(ctx context.Context, op int, dev, port uint32) ([]hwCounter, error) {
	req, err := request(op, flagsDoit, portAttrs(dev, port))
	if err != nil {
		return nil, err
	}
	reply, err := c.get(ctx, req)
	if err != nil {
		return nil, err
	}
	return parseStatReply(reply.Data)
}

// statStatus lists every counter of a port with its index and, for
// optional ones, whether it is enabled (STAT_GET_STATUS).
func (c *nldevClient) statStatus(ctx context.Context, dev, port uint32) ([]hwCounter, error) {
	return c.statOne(ctx, cmdStatGetStatus, dev, port)
}

// statValues reads the port's default counter (STAT_GET without STAT_RES).
func (c *nldevClient) statValues(ctx context.Context, dev, port uint32) ([]hwCounter, error) {
	return c.statOne(ctx, cmdStatGet, dev, port)
}

// qpMode queries the port's QP counter mode, with iproute2's attribute order.
func (c *nldevClient) qpMode(ctx context.Context, dev, port uint32) (qpMode, error) {
	req, err := request(cmdStatGet, flagsDoit, func(ae *netlink.AttributeEncoder) {
		portAttrs(dev, port)(ae)
		ae.Uint32(attrStatMode, counterModeManual)
		ae.Uint32(attrStatRes, attrResQP)
	})
	if err != nil {
		return qpMode{}, err
	}
	reply, err := c.get(ctx, req)
	if err != nil {
		return qpMode{}, err
	}
	return parseQPMode(reply.Data)
}

// qpSets dumps the port's bound QP counters, within the receive budget.
func (c *nldevClient) qpSets(ctx context.Context, dev, port uint32) ([]qpSet, error) {
	req, err := request(cmdStatGet, flagsDump, func(ae *netlink.AttributeEncoder) {
		portAttrs(dev, port)(ae)
		ae.Uint32(attrStatRes, attrResQP)
	})
	if err != nil {
		return nil, err
	}
	msgs, err := c.dumpWithin(ctx, req, qpDumpMaxBytes, qpDumpMaxMsgs)
	if err != nil {
		return nil, err
	}
	var out []qpSet
	for _, m := range msgs {
		sets, err := parseQPDumpMessage(m.Data)
		if err != nil {
			return nil, err
		}
		for _, s := range sets {
			if s.port == 0 || s.port == port {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

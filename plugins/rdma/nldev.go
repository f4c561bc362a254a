package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
)

// RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV): plain netlink, no
// generic-netlink header; attributes follow the nlmsghdr directly.
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

var errDumpOverflow = errors.New("rdma netlink dump exceeded receive budget")

// attr is one netlink attribute with the NESTED/BYTEORDER flags masked off.
type attr struct {
	typ  uint16
	data []byte
}

// parseAttrs decodes a flat attribute stream. Truncated headers or lengths
// that run past the buffer are errors; PAD (type 0) attributes are skipped.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("truncated attribute header (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & 0x3fff
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("attribute type %d: bad length %d (%d bytes left)", t, l, len(b))
		}
		if t != 0 {
			out = append(out, attr{typ: t, data: b[4:l]})
		}
		al := (l + 3) &^ 3
		if al > len(b) {
			al = len(b)
		}
		b = b[al:]
	}
	return out, nil
}

func attrU32(a attr) (uint32, error) {
	if len(a.data) != 4 {
		return 0, fmt.Errorf("attribute %d: want 4 bytes, have %d", a.typ, len(a.data))
	}
	return binary.NativeEndian.Uint32(a.data), nil
}

func attrU64(a attr) (uint64, error) {
	if len(a.data) != 8 {
		return 0, fmt.Errorf("attribute %d: want 8 bytes, have %d", a.typ, len(a.data))
	}
	return binary.NativeEndian.Uint64(a.data), nil
}

func attrU8(a attr) (uint8, error) {
	if len(a.data) < 1 {
		return 0, fmt.Errorf("attribute %d: empty", a.typ)
	}
	return a.data[0], nil
}

func attrString(a attr) string {
	s := a.data
	for i, c := range s {
		if c == 0 {
			s = s[:i]
			break
		}
	}
	return string(s)
}

func encodeU32(typ uint16, v uint32) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint16(b[0:2], 8)
	binary.NativeEndian.PutUint16(b[2:4], typ)
	binary.NativeEndian.PutUint32(b[4:8], v)
	return b
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// hwCounter is one STAT_HWCOUNTER_ENTRY.
type hwCounter struct {
	name     string
	value    uint64
	hasValue bool
	index    uint32
	dynamic  bool // carries STAT_HWCOUNTER_DYNAMIC: an optional counter
	enabled  bool // DYNAMIC == 1
}

func parseHWCounters(b []byte) ([]hwCounter, error) {
	entries, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	var out []hwCounter
	for _, e := range entries {
		if e.typ != attrStatHWCounterEntry {
			continue
		}
		fields, err := parseAttrs(e.data)
		if err != nil {
			return nil, fmt.Errorf("hw counter entry: %w", err)
		}
		var c hwCounter
		for _, f := range fields {
			switch f.typ {
			case attrStatHWCounterName:
				c.name = attrString(f)
			case attrStatHWCounterValue:
				if c.value, err = attrU64(f); err != nil {
					return nil, err
				}
				c.hasValue = true
			case attrStatHWCounterIndex:
				if c.index, err = attrU32(f); err != nil {
					return nil, err
				}
			case attrStatHWCounterDynamic:
				v, err := attrU8(f)
				if err != nil {
					return nil, err
				}
				c.dynamic, c.enabled = true, v != 0
			}
		}
		if c.name == "" {
			return nil, errors.New("hw counter entry without a name")
		}
		out = append(out, c)
	}
	return out, nil
}

// statReply decodes a STAT_GET / STAT_GET_STATUS reply's counter table.
func parseStatReply(b []byte) ([]hwCounter, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	for _, a := range attrs {
		if a.typ == attrStatHWCounters {
			return parseHWCounters(a.data)
		}
	}
	return nil, nil
}

type nlDevice struct {
	index uint32
	name  string
	ports uint32
}

func parseDevice(b []byte) (nlDevice, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nlDevice{}, err
	}
	var d nlDevice
	var haveIdx bool
	for _, a := range attrs {
		switch a.typ {
		case attrDevIndex:
			if d.index, err = attrU32(a); err != nil {
				return d, err
			}
			haveIdx = true
		case attrDevName:
			d.name = attrString(a)
		case attrPortIndex:
			if d.ports, err = attrU32(a); err != nil {
				return d, err
			}
		}
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
	attrs, err := parseAttrs(b)
	if err != nil {
		return qpMode{}, err
	}
	var m qpMode
	var have bool
	for _, a := range attrs {
		switch a.typ {
		case attrStatMode:
			if m.mode, err = attrU32(a); err != nil {
				return m, err
			}
			have = true
		case attrStatAutoModeMask:
			mask, err := attrU32(a)
			if err != nil {
				return m, err
			}
			m.maskType, m.maskPID = mask&autoMaskType != 0, mask&autoMaskPID != 0
		}
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
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	var out []qpSet
	for _, a := range attrs {
		if a.typ != attrStatCounter {
			continue
		}
		entries, err := parseAttrs(a.data)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.typ != attrStatCounterEntry {
				continue
			}
			fields, err := parseAttrs(e.data)
			if err != nil {
				return nil, err
			}
			s := qpSet{stats: map[string]uint64{}}
			for _, f := range fields {
				switch f.typ {
				case attrPortIndex:
					if s.port, err = attrU32(f); err != nil {
						return nil, err
					}
				case attrStatMode:
					if s.mode, err = attrU32(f); err != nil {
						return nil, err
					}
				case attrResType:
					t, err := attrU8(f)
					if err != nil {
						return nil, err
					}
					s.qpType = qpTypeName(t)
				case attrResPID, attrResKernName:
					s.hasPID = true
				case attrStatHWCounters:
					hw, err := parseHWCounters(f.data)
					if err != nil {
						return nil, err
					}
					for _, c := range hw {
						if c.hasValue {
							s.stats[c.name] = c.value
						}
					}
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// nlConn is the part of *netlink.Conn the client uses (nltest provides a
// fake one in tests).
type nlConn interface {
	Send(netlink.Message) (netlink.Message, error)
	Receive() ([]netlink.Message, error)
	Close() error
}

// nldevClient speaks the read-only part of RDMA_NLDEV. It only ever sends
// GET, STAT_GET and STAT_GET_STATUS: never SET, never STAT_SET.
type nldevClient struct {
	conn nlConn
}

// exchange sends one request and returns its data messages. Doit replies
// end with an ACK (a separate datagram on real kernels), dumps with
// NLMSG_DONE (which carries a dump's error, if any); both are consumed.
func (c *nldevClient) exchange(ctx context.Context, op int, flags netlink.HeaderFlags, data []byte, maxBytes, maxMsgs int) ([]netlink.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch op {
	case cmdGet, cmdPortGet, cmdStatGet, cmdStatGetStatus:
	default:
		return nil, fmt.Errorf("refusing to send RDMA netlink op %d", op)
	}
	req, err := c.conn.Send(netlink.Message{Header: netlink.Header{Type: nldevType(op), Flags: flags}, Data: data})
	if err != nil {
		return nil, err
	}
	dump := flags&netlink.Dump == netlink.Dump
	var out []netlink.Message
	var size int
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msgs, err := c.conn.Receive()
		if err != nil {
			return nil, err
		}
		acked := false
		for _, m := range msgs {
			if m.Header.Sequence != req.Header.Sequence {
				continue // stale reply of an aborted exchange
			}
			if m.Header.Type == netlink.Error {
				acked = true // ACK (error 0); errors were returned by Receive
				continue
			}
			if m.Header.Type == netlink.Done {
				continue
			}
			size += len(m.Data)
			if (maxBytes > 0 && size > maxBytes) || (maxMsgs > 0 && len(out)+1 > maxMsgs) {
				return nil, errDumpOverflow
			}
			out = append(out, m)
		}
		if dump || acked {
			return out, nil
		}
		if len(msgs) == 0 {
			return nil, errors.New("rdma netlink: reply ended without an ACK")
		}
	}
}

func (c *nldevClient) devices(ctx context.Context) ([]nlDevice, error) {
	msgs, err := c.exchange(ctx, cmdGet, flagsDump, nil, 0, 0)
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

func portQuery(dev, port uint32) []byte {
	return concat(encodeU32(attrDevIndex, dev), encodeU32(attrPortIndex, port))
}

func (c *nldevClient) statOne(ctx context.Context, op int, data []byte) ([]hwCounter, error) {
	msgs, err := c.exchange(ctx, op, flagsDoit, data, 0, 0)
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("want 1 reply message, got %d", len(msgs))
	}
	return parseStatReply(msgs[0].Data)
}

// statStatus lists every counter of a port with its index and, for
// optional ones, whether it is enabled (STAT_GET_STATUS).
func (c *nldevClient) statStatus(ctx context.Context, dev, port uint32) ([]hwCounter, error) {
	return c.statOne(ctx, cmdStatGetStatus, portQuery(dev, port))
}

// statValues reads the port's default counter (STAT_GET without STAT_RES).
func (c *nldevClient) statValues(ctx context.Context, dev, port uint32) ([]hwCounter, error) {
	return c.statOne(ctx, cmdStatGet, portQuery(dev, port))
}

// qpMode queries the port's QP counter mode, with iproute2's attribute order.
func (c *nldevClient) qpMode(ctx context.Context, dev, port uint32) (qpMode, error) {
	data := concat(encodeU32(attrDevIndex, dev), encodeU32(attrPortIndex, port),
		encodeU32(attrStatMode, counterModeManual), encodeU32(attrStatRes, attrResQP))
	msgs, err := c.exchange(ctx, cmdStatGet, flagsDoit, data, 0, 0)
	if err != nil {
		return qpMode{}, err
	}
	if len(msgs) != 1 {
		return qpMode{}, fmt.Errorf("want 1 reply message, got %d", len(msgs))
	}
	return parseQPMode(msgs[0].Data)
}

// qpSets dumps the port's bound QP counters, within the receive budget.
func (c *nldevClient) qpSets(ctx context.Context, dev, port uint32) ([]qpSet, error) {
	data := concat(encodeU32(attrDevIndex, dev), encodeU32(attrPortIndex, port), encodeU32(attrStatRes, attrResQP))
	msgs, err := c.exchange(ctx, cmdStatGet, flagsDump, data, qpDumpMaxBytes, qpDumpMaxMsgs)
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

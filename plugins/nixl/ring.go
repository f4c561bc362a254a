package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
)

// The ring file NIXL's buffer exporter writes, one per agent, at
// $NIXL_TELEMETRY_DIR/<agent name> (layout facts: README.md, "Format").
// Everything here works on bytes, so the decoder is the same for the mmap
// reader, the tests and the fuzzer.

// Header field offsets. The header never changed across NIXL versions.
const (
	offWritePos = 0  // u64, producer's next slot (masked)
	offReadPos  = 8  // u64, consumer's next slot: the only field we write
	offVersion  = 16 // i32, slot layout version; 0 = never initialised
	offCapacity = 24 // u64, slots, a power of two
	offMask     = 32 // u64, capacity-1
	headerSize  = 40
	// maxSlotBytes bounds what one drain may copy (the plugin's memory
	// limit is 64 MiB): 1M events of 16 bytes, 256 times NIXL's default.
	maxSlotBytes = 16 << 20
)

// header is the decoded fixed part of a ring file.
type header struct {
	writePos, readPos uint64
	version           int32
	capacity, mask    uint64
}

// parseHeader decodes the 40 header bytes of b (little-endian: every NIXL
// platform is). It does not validate; see header.layout.
func parseHeader(b []byte) header {
	le := binary.LittleEndian
	return header{
		writePos: le.Uint64(b[offWritePos:]),
		readPos:  le.Uint64(b[offReadPos:]),
		version:  int32(le.Uint32(b[offVersion:])),
		capacity: le.Uint64(b[offCapacity:]),
		mask:     le.Uint64(b[offMask:]),
	}
}

// slotLayout is how one version encodes an event slot.
type slotLayout struct {
	version int32
	size    int // bytes per slot
	// typed layouts (v2 16-byte, v3, v4) carry a numeric event type at
	// typeOff; named ones (v1, the unreleased 48-byte v2) a NUL-terminated
	// name of nameLen bytes at nameOff.
	named     bool
	typeOff   int
	maxType   eventType // highest event type the version defines (typed only)
	nameOff   int
	nameLen   int
	valueOff  int
	layoutTag string // for messages and tests
}

var (
	layoutV4      = slotLayout{version: 4, size: 16, typeOff: 0, maxType: evEventsDropped, valueOff: 8, layoutTag: "v4"}
	layoutV3      = slotLayout{version: 3, size: 16, typeOff: 0, maxType: evErrLast, valueOff: 8, layoutTag: "v3"}
	layoutV2      = slotLayout{version: 2, size: 16, typeOff: 4, maxType: evErrLast, valueOff: 8, layoutTag: "v2"}
	layoutV2Draft = slotLayout{version: 2, size: 48, named: true, nameOff: 4, nameLen: 32, valueOff: 40, layoutTag: "v2-draft"}
	layoutV1      = slotLayout{version: 1, size: 56, named: true, nameOff: 12, nameLen: 32, valueOff: 48, layoutTag: "v1"}
)

// formatError is a file that is not (or no longer) a readable NIXL ring;
// reason is the nixl_reader_errors_total label.
type formatError struct {
	reason string
	msg    string
}

func (e *formatError) Error() string { return e.msg }

func invalidHeader(format string, args ...any) error {
	return &formatError{reason: reasonInvalidHeader, msg: fmt.Sprintf(format, args...)}
}

// layout validates h against the file size (FORMAT rule 1: version known,
// capacity a power of two with the matching mask, size exactly header +
// capacity × slot) and returns the slot layout.
func (h header) layout(size int64) (slotLayout, error) {
	if size < headerSize {
		return slotLayout{}, invalidHeader("%d bytes is shorter than the %d-byte header", size, headerSize)
	}
	if h.capacity == 0 || bits.OnesCount64(h.capacity) != 1 {
		return slotLayout{}, invalidHeader("capacity %d is not a power of two", h.capacity)
	}
	if h.mask != h.capacity-1 {
		return slotLayout{}, invalidHeader("mask %#x does not match capacity %d", h.mask, h.capacity)
	}
	slots := uint64(size - headerSize)
	if slots%h.capacity != 0 {
		return slotLayout{}, invalidHeader("%d slot bytes are not a multiple of capacity %d", slots, h.capacity)
	}
	if slots > maxSlotBytes {
		return slotLayout{}, invalidHeader("%d slot bytes exceed the %d this reader maps", slots, maxSlotBytes)
	}
	slot := slots / h.capacity
	var l slotLayout
	switch {
	case h.version == 4 && slot == 16:
		l = layoutV4
	case h.version == 3 && slot == 16:
		l = layoutV3
	case h.version == 2 && slot == 16:
		l = layoutV2
	case h.version == 2 && slot == 48:
		l = layoutV2Draft
	case h.version == 1 && slot == 56:
		l = layoutV1
	case h.version == 0:
		return slotLayout{}, invalidHeader("version 0: the writer never initialised the ring (a failed agent start)")
	default:
		return slotLayout{}, invalidHeader("version %d with %d-byte slots is not a NIXL layout this reader knows (1-4)", h.version, slot)
	}
	if err := h.checkPositions(); err != nil {
		return slotLayout{}, err
	}
	return l, nil
}

// checkPositions rejects positions a correct writer and reader never
// store (they are masked, so always below capacity).
func (h header) checkPositions() error {
	if h.writePos >= h.capacity || h.readPos >= h.capacity {
		return &formatError{reason: reasonInvalidPosition,
			msg: fmt.Sprintf("write_pos %d / read_pos %d outside capacity %d", h.writePos, h.readPos, h.capacity)}
	}
	return nil
}

// unread is the number of events waiting in the ring.
func (h header) unread() uint64 { return (h.writePos - h.readPos) & h.mask }

// full tells whether the producer is dropping new events: only
// capacity-1 slots are usable.
func (h header) full() bool { return h.capacity > 1 && h.unread() == h.capacity-1 }

// copyUnread appends the slots from..to (exclusive, in ring order,
// wrapping at capacity) of slots (the bytes after the header) to dst. from
// and to must be below capacity and slots must hold capacity × l.size
// bytes.
func copyUnread(dst, slots []byte, l slotLayout, capacity, from, to uint64) []byte {
	size := uint64(l.size)
	if to >= from {
		return append(dst, slots[from*size:to*size]...)
	}
	dst = append(dst, slots[from*size:capacity*size]...)
	return append(dst, slots[:to*size]...)
}

// decodeSlots adds every event of run (whole slots of layout l) to s and
// returns how many had an unknown type or name; those are skipped.
func decodeSlots(run []byte, l slotLayout, s *agentStats) (unknown uint64) {
	for len(run) >= l.size {
		slot := run[:l.size]
		run = run[l.size:]
		t, ok := l.eventType(slot)
		if !ok {
			unknown++
			continue
		}
		s.add(t, binary.LittleEndian.Uint64(slot[l.valueOff:]))
	}
	return unknown
}

// eventType reads the event type of one slot. Padding and, for v2, the
// category are ignored: writers leave them uninitialised.
func (l slotLayout) eventType(slot []byte) (eventType, bool) {
	if !l.named {
		t := eventType(binary.LittleEndian.Uint32(slot[l.typeOff:]))
		return t, t <= l.maxType
	}
	name := slot[l.nameOff : l.nameOff+l.nameLen]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	t, ok := eventByName[string(name)] // no allocation: the compiler looks up without converting
	return t, ok
}

// eventType is NIXL's event enum (v2-v4 numbering); the named layouts map
// onto it.
type eventType uint32

const (
	evTxBytes eventType = iota
	evRxBytes
	evTxRequests
	evRxRequests
	evMemRegistered
	evMemDeregistered
	evXferTime
	evXferPostTime
	evErrFirst                                                       // 8: agent_err_not_posted, then one per status
	evErrLast       = evErrFirst + eventType(len(errorStatuses)) - 1 // 19
	evEventsDropped = evErrLast + 1                                  // 20, v4 only
	numEventTypes   = int(evEventsDropped) + 1
)

// errorStatuses are NIXL's error statuses in event-type order (NIXL_ERR_*
// -1..-12), the status label of agent_errors_total.
var errorStatuses = [...]string{
	"not_posted", "invalid_param", "backend", "not_found", "mismatch", "not_allowed",
	"repost_active", "unknown", "not_supported", "remote_disconnect", "canceled", "no_telemetry",
}

// eventByName maps the names of the named layouts onto event types: v1
// wrote the agent_* names and errors as NIXL_ERR_<STATUS>.
var eventByName = func() map[string]eventType {
	m := map[string]eventType{
		"agent_tx_bytes":                 evTxBytes,
		"agent_rx_bytes":                 evRxBytes,
		"agent_tx_requests_num":          evTxRequests,
		"agent_rx_requests_num":          evRxRequests,
		"agent_memory_registered":        evMemRegistered,
		"agent_memory_deregistered":      evMemDeregistered,
		"agent_xfer_time":                evXferTime,
		"agent_xfer_post_time":           evXferPostTime,
		"agent_telemetry_events_dropped": evEventsDropped,
	}
	for i, s := range errorStatuses {
		m["NIXL_ERR_"+strings.ToUpper(s)] = evErrFirst + eventType(i)
		m["agent_err_"+s] = evErrFirst + eventType(i)
	}
	return m
}()

package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pristine are the SHA-256 of the fixture rings (testdata/README.md).
var pristine = map[string]string{
	"3f6c1a2e-8b4d-4e0f-9a71-5c2d8e9b0a14": "6120e13fb32161cafe0fef25ea2ee760e0a9d06487e44d5fa6be2fc3df013f19",
	"decode-tp1":                           "114d407130fd26bd973c1d3dfea398c63abac25bfdc2e267bb696245a1527dfe",
	"kvbm-worker-0":                        "844be7562d7e1a9315458ab6dc2cff87152c6f90b24ebce2a980249d813f5bac",
}

const wrapped = "3f6c1a2e-8b4d-4e0f-9a71-5c2d8e9b0a14"

// event is one telemetry event as a test writes it.
type event struct {
	typ eventType
	val uint64
}

// nameOf is the name a named layout writes for t (v1 wrote errors as
// NIXL_ERR_<STATUS>).
func nameOf(t eventType) string {
	if t >= evErrFirst && t <= evErrLast {
		return "NIXL_ERR_" + strings.ToUpper(errorStatuses[t-evErrFirst])
	}
	for name, typ := range eventByName {
		if typ == t && strings.HasPrefix(name, "agent_") && !strings.HasPrefix(name, "agent_err_") {
			return name
		}
	}
	panic("no name for event type")
}

// putSlot encodes e into slot as NIXL's writer of layout l does, with the
// bytes a writer leaves uninitialised (padding, v2's category) set to junk.
func putSlot(slot []byte, l slotLayout, e event) {
	for i := range slot {
		slot[i] = 0xa5
	}
	le := binary.LittleEndian
	if l.named {
		name := slot[l.nameOff : l.nameOff+l.nameLen]
		clear(name)
		copy(name, nameOf(e.typ))
	} else {
		le.PutUint32(slot[l.typeOff:], uint32(e.typ))
	}
	le.PutUint64(slot[l.valueOff:], e.val)
}

// buildRing returns a ring file of layout l whose unread run, starting at
// read_pos rp, holds events; every other slot holds junk events that a
// reader outside [read_pos, write_pos) would count.
func buildRing(l slotLayout, capacity, rp uint64, events []event) []byte {
	b := make([]byte, headerSize+int(capacity)*l.size)
	le := binary.LittleEndian
	wp := (rp + uint64(len(events))) & (capacity - 1)
	le.PutUint64(b[offWritePos:], wp)
	le.PutUint64(b[offReadPos:], rp)
	le.PutUint32(b[offVersion:], uint32(l.version))
	le.PutUint32(b[offVersion+4:], uint32(l.version))
	le.PutUint64(b[offCapacity:], capacity)
	le.PutUint64(b[offMask:], capacity-1)
	for i := uint64(0); i < capacity; i++ {
		putSlot(b[headerSize+int(i)*l.size:][:l.size], l, event{evTxBytes, 1 << 40}) // stale
	}
	for i, e := range events {
		pos := (rp + uint64(i)) & (capacity - 1)
		putSlot(b[headerSize+int(pos)*l.size:][:l.size], l, e)
	}
	return b
}

// transfer is the group of four events NIXL stages per completed transfer.
func transfer(post, xfer, bytes uint64, tx bool) []event {
	b, r := evRxBytes, evRxRequests
	if tx {
		b, r = evTxBytes, evTxRequests
	}
	return []event{{evXferPostTime, post}, {evXferTime, xfer}, {b, bytes}, {r, 1}}
}

// decodeFile validates and decodes a whole ring file as one drain does.
func decodeFile(t testing.TB, b []byte) (*agentStats, slotLayout, uint64, error) {
	h := parseHeaderOrZero(b)
	l, err := h.layout(int64(len(b)))
	if err != nil {
		return nil, l, 0, err
	}
	s := newAgentStats(defaultBucketsUS)
	run := copyUnread(nil, b[headerSize:], l, h.capacity, h.readPos, h.writePos)
	return s, l, decodeSlots(run, l, s), nil
}

// TestLayouts: every supported layout decodes the same events, wrapped,
// with junk in the bytes the writer leaves uninitialised.
func TestLayouts(t *testing.T) {
	events := append(transfer(7, 70, 4096, true), transfer(0, 0, 512, false)...)
	events = append(events, event{evMemRegistered, 1 << 30}, event{evErrFirst + 2, 1}, event{evErrLast, 1})
	for _, l := range []slotLayout{layoutV1, layoutV2, layoutV2Draft, layoutV3, layoutV4} {
		t.Run(l.layoutTag, func(t *testing.T) {
			b := buildRing(l, 16, 12, events) // wraps: slots 12..15, then 0..6
			s, got, unknown, err := decodeFile(t, b)
			if err != nil {
				t.Fatal(err)
			}
			if got != l || unknown != 0 {
				t.Fatalf("layout %s, %d unknown", got.layoutTag, unknown)
			}
			want := map[eventType]uint64{evTxBytes: 4096, evRxBytes: 512, evTxRequests: 1, evRxRequests: 1, evXferTime: 70, evXferPostTime: 7, evMemRegistered: 1 << 30, evErrFirst + 2: 1, evErrLast: 1}
			for typ := eventType(0); int(typ) < numEventTypes; typ++ {
				if s.sum[typ] != want[typ] {
					t.Errorf("sum of type %d = %d, want %d", typ, s.sum[typ], want[typ])
				}
			}
			if s.last[evXferTime] != 0 || s.xfer.count != 2 || s.xfer.counts[0] != 1 {
				t.Errorf("xfer histogram %+v, last %d", s.xfer, s.last[evXferTime])
			}
		})
	}
}

// TestUnknownEvents: a type outside the version's enum is skipped and
// counted; v4's dropped-events type is unknown to v3 and v2.
func TestUnknownEvents(t *testing.T) {
	events := []event{{evEventsDropped, 5}, {99, 1}, {evTxBytes, 10}}
	for _, tc := range []struct {
		l       slotLayout
		unknown uint64
		dropped uint64
	}{{layoutV4, 1, 5}, {layoutV3, 2, 0}, {layoutV2, 2, 0}} {
		b := buildRing(tc.l, 8, 0, events)
		s, _, unknown, err := decodeFile(t, b)
		if err != nil {
			t.Fatal(err)
		}
		if unknown != tc.unknown || s.sum[evEventsDropped] != tc.dropped || s.sum[evTxBytes] != 10 {
			t.Errorf("%s: %d unknown, dropped %d, tx %d", tc.l.layoutTag, unknown, s.sum[evEventsDropped], s.sum[evTxBytes])
		}
	}
	// a v1 backend event (category 3, any name) is unknown too
	b := buildRing(layoutV1, 4, 0, []event{{evTxBytes, 1}})
	copy(b[headerSize+layoutV1.nameOff:], "ucx_backend_custom\x00\x00\x00")
	if _, _, unknown, _ := decodeFile(t, b); unknown != 1 {
		t.Errorf("v1 backend event: %d unknown, want 1", unknown)
	}
}

// TestHeaderRejected: FORMAT rule 1, each violation named.
func TestHeaderRejected(t *testing.T) {
	good := buildRing(layoutV4, 8, 0, nil)
	le := binary.LittleEndian
	for _, tc := range []struct {
		name   string
		edit   func(b []byte) []byte
		reason string
		detail string
	}{
		{"short", func(b []byte) []byte { return b[:39] }, reasonInvalidHeader, "shorter than the 40-byte header"},
		{"version 0 (failed create)", func(b []byte) []byte { le.PutUint32(b[offVersion:], 0); return b }, reasonInvalidHeader, "never initialised"},
		{"version 5", func(b []byte) []byte { le.PutUint32(b[offVersion:], 5); return b }, reasonInvalidHeader, "version 5"},
		{"v1 with 16-byte slots", func(b []byte) []byte { le.PutUint32(b[offVersion:], 1); return b }, reasonInvalidHeader, "version 1 with 16-byte slots"},
		{"capacity not a power of two", func(b []byte) []byte { le.PutUint64(b[offCapacity:], 6); le.PutUint64(b[offMask:], 5); return b }, reasonInvalidHeader, "not a power of two"},
		{"capacity 0", func(b []byte) []byte { le.PutUint64(b[offCapacity:], 0); return b }, reasonInvalidHeader, "capacity 0"},
		{"mask", func(b []byte) []byte { le.PutUint64(b[offMask:], 8); return b }, reasonInvalidHeader, "mask 0x8"},
		{"size", func(b []byte) []byte { return append(b, 0) }, reasonInvalidHeader, "not a multiple"},
		{"size for capacity", func(b []byte) []byte { return append(b, make([]byte, 16)...) }, reasonInvalidHeader, "18-byte slots"},
		{"write_pos", func(b []byte) []byte { le.PutUint64(b[offWritePos:], 8); return b }, reasonInvalidPosition, "write_pos 8"},
		{"read_pos", func(b []byte) []byte { le.PutUint64(b[offReadPos:], 1<<40); return b }, reasonInvalidPosition, "read_pos 1099511627776"},
	} {
		b := tc.edit(append([]byte(nil), good...))
		_, _, _, err := decodeFile(t, b)
		fe, ok := err.(*formatError)
		if !ok || fe.reason != tc.reason || !strings.Contains(fe.msg, tc.detail) {
			t.Errorf("%s: %v, want %s mentioning %q", tc.name, err, tc.reason, tc.detail)
		}
	}
	// capacity 1 is legal: a ring that can never hold an event
	one := buildRing(layoutV4, 1, 0, nil)
	if _, _, _, err := decodeFile(t, one); err != nil || parseHeader(one).full() {
		t.Errorf("capacity 1: %v, full %v", err, parseHeader(one).full())
	}
}

// TestFixtureMistakes: the wrapped fixture read the wrong ways gives the
// wrong answers EXPECTED.md lists, so the right answer is no accident.
func TestFixtureMistakes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata/telemetry_dir", wrapped))
	if err != nil {
		t.Fatal(err)
	}
	h := parseHeader(b)
	l, err := h.layout(int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	slots := b[headerSize:]
	for _, tc := range []struct {
		name     string
		run      []byte
		tx, txRq uint64
	}{
		{"ring order", copyUnread(nil, slots, l, h.capacity, h.readPos, h.writePos), 623132672, 45},
		{"all slots", slots, 1095462912, 83},
		{"no wrap", slots[:h.writePos*16], 295313408, 28},
		{"stops at the end", slots[h.readPos*16:], 327819264, 17},
	} {
		s := newAgentStats(defaultBucketsUS)
		decodeSlots(tc.run, l, s)
		if s.sum[evTxBytes] != tc.tx || s.sum[evTxRequests] != tc.txRq {
			t.Errorf("%s: tx %d / %d requests, EXPECTED.md says %d / %d", tc.name, s.sum[evTxBytes], s.sum[evTxRequests], tc.tx, tc.txRq)
		}
	}
}

// TestHistogramBounds: le is inclusive; values above the last bound only
// reach +Inf.
func TestHistogramBounds(t *testing.T) {
	h := newHistogram([]float64{10, 25.5, 100})
	for _, v := range []uint64{0, 10, 11, 25, 26, 100, 101, 1 << 40} {
		h.observe(v)
	}
	got := h.cumulative(nil)
	if want := []uint64{2, 4, 6}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || h.count != 8 {
		t.Errorf("cumulative %v count %d, want %v count 8", got, h.count, want)
	}
}

// FuzzDecode: any file content is either refused by the header check or
// decoded without panicking, consuming fewer events than the capacity.
func FuzzDecode(f *testing.F) {
	for name := range pristine {
		b, err := os.ReadFile(filepath.Join("testdata/telemetry_dir", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, l := range []slotLayout{layoutV1, layoutV2, layoutV2Draft, layoutV3} {
		f.Add(buildRing(l, 8, 5, transfer(1, 2, 3, true)))
	}
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		h := parseHeaderOrZero(b)
		l, err := h.layout(int64(len(b)))
		if err != nil {
			if _, ok := err.(*formatError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		s := newAgentStats(defaultBucketsUS)
		run := copyUnread(nil, b[headerSize:], l, h.capacity, h.readPos, h.writePos)
		if n := uint64(len(run) / l.size); n != h.unread() || n >= h.capacity && h.capacity > 1 {
			t.Fatalf("%d events from a ring of %d with %d unread", n, h.capacity, h.unread())
		}
		unknown := decodeSlots(run, l, s)
		var counted uint64
		for _, c := range s.xfer.counts {
			counted += c
		}
		if counted != s.xfer.count || unknown > h.unread() {
			t.Fatalf("histogram count %d vs buckets %d, unknown %d", s.xfer.count, counted, unknown)
		}
	})
}

func parseHeaderOrZero(b []byte) header {
	if len(b) < headerSize {
		return header{}
	}
	return parseHeader(b)
}

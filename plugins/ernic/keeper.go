package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// The server rewrites <id>.stats in place about once a second: it
// truncates the file and writes it again, with no atomic rename. A read
// can therefore see an empty file, a prefix of the new text, or the start
// of the old text followed by the rest of the new one. Exporting such a
// read would show a counter reset (a missing key reads 0) or a spike (two
// half lines run together) that rate() turns into traffic that never
// happened. Two defences:
//
//   - readStable reads the file until two reads in a row are identical and
//     the text is complete (isComplete), a few times at most;
//   - keeper remembers, per instance, the last accepted values of the
//     current server process and refuses a read that is incomplete or lost
//     the LIF block (the accepted values are exported again); of a read it
//     takes, a counter lower than, or missing against, the accepted one
//     keeps the accepted value (monotonic). Both are counted as torn.
//
// A server restart is a new process (another pid, or the same pid with
// another start time): its counters start again from zero, and that reset
// is exported as it is, so rate() sees a real reset. A server whose write
// count goes down without a restart has started its statistics again: it
// is believed after resetConfirmations consecutive complete reads that
// agree with each other.

const (
	// maxStatsSize bounds one read of a .stats file (about 5 KiB with a few
	// QPs, 150 bytes per further QP): two copies must fit the plugin's
	// memory limit whatever a corrupt or hostile file holds.
	maxStatsSize       = 8 << 20
	maxReads           = 6
	rereadDelay        = 3 * time.Millisecond
	resetConfirmations = 3
)

// readStable returns the parsed file and whether it is trustworthy: two
// identical consecutive reads of a complete file. On a read error it
// returns the error.
func readStable(ctx context.Context, path string) (*stats, bool, error) {
	var prev []byte
	for i := 0; i < maxReads; i++ {
		data, err := readCapped(path, maxStatsSize)
		if err != nil {
			return nil, false, err
		}
		if prev != nil && bytes.Equal(prev, data) {
			if s := parseStats(data); s.complete {
				return s, true, nil
			}
		}
		if prev != nil { // the file is changing or incomplete: let the writer finish
			select {
			case <-ctx.Done():
				return parseStats(data), false, nil
			case <-time.After(rereadDelay):
			}
		}
		prev = data
	}
	return parseStats(prev), false, nil
}

// readCapped reads a whole file of at most limit bytes; a larger one is an
// error naming it.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d MiB; not read", path, limit>>20)
	}
	return data, nil
}

// incarnation identifies one server process.
type incarnation struct {
	pid       int
	startTick uint64 // 0 when procfs did not tell
}

// same reports whether a and b are the same process; an unknown start time
// matches any.
func (a incarnation) same(b incarnation) bool {
	return a.pid == b.pid && (a.startTick == 0 || b.startTick == 0 || a.startTick == b.startTick)
}

// kept is what keeper remembers about one instance.
type kept struct {
	inc      incarnation
	accepted *stats // nil until a trustworthy read of this process
	torn     float64
	pending  *stats // a complete read lower than accepted, and how many agreed
	pendingN int
	seen     bool // listed in the current collect
}

// keeper holds the last accepted statistics per instance id.
type keeper struct{ byID map[string]*kept }

func newKeeper() *keeper { return &keeper{byID: map[string]*kept{}} }

// accept decides what to export for instance id, whose server is inc,
// given a new read s (trusted: from readStable). It returns the statistics
// to export (nil: none yet) and the instance's torn-read count.
func (k *keeper) accept(id string, inc incarnation, s *stats, trusted bool) (*stats, float64) {
	e := k.byID[id]
	if e == nil {
		e = &kept{inc: inc}
		k.byID[id] = e
	}
	e.seen = true
	if !e.inc.same(inc) { // a new server process: forget the old one's values
		e.inc, e.accepted, e.pending, e.pendingN = inc, nil, nil, 0
	}
	if e.inc.startTick == 0 {
		e.inc.startTick = inc.startTick
	}
	switch {
	case !trusted:
		e.torn++
	case e.accepted == nil:
		e.accepted = s
	case e.accepted.hasLIF && !s.hasLIF:
		e.torn++ // cut off before the LIF block
	case restarted(e.accepted, s):
		// The server started its statistics again without restarting,
		// or a torn read: believed once it holds.
		e.torn++
		if e.pending != nil && !backwards(e.pending, s) {
			e.pendingN++
		} else {
			e.pendingN = 1
		}
		e.pending = s
		if e.pendingN >= resetConfirmations {
			e.accepted, e.pending, e.pendingN = s, nil, 0
		}
	default:
		merged, clamped := monotonic(e.accepted, s)
		if clamped {
			e.torn++
		}
		e.accepted, e.pending, e.pendingN = merged, nil, 0
	}
	return e.accepted, e.torn
}

// restarted reports whether cur looks like statistics started again: a
// lower write count and device counters lower, none higher. A write count
// that is only lower because the accepted one was blended by a torn read
// (see monotonic) comes with counters that kept growing, or stayed.
func restarted(old, cur *stats) bool {
	if !lower(old.get(keyWriteCount), cur.get(keyWriteCount)) {
		return false
	}
	anyLower := false
	for _, c := range instanceCounters {
		o, v := old.get(c.key), cur.get(c.key)
		if c.key == keyWriteCount || o.n == nil || v.n == nil {
			continue
		}
		if v.counter() > o.counter() {
			return false
		}
		anyLower = anyLower || v.counter() < o.counter()
	}
	return anyLower
}

// lower reports whether cur's counter is below old's.
func lower(old, cur value) bool { return cur.counter() < old.counter() }

// monotonic returns cur with every counter that is missing, not an integer
// or lower than in old replaced by old's value, and whether it replaced
// any. Even a stable, complete read can mix two writes: when the new text
// has the old one's length, a read that spans the rewrite is well formed,
// and a number cut at the seam is a blend of two values that may be
// higher than both (new 12650196, old 12637495: "1265"+"7495"). The next
// reads are then lower; taking the maximum keeps every counter from going
// backwards, at the price of holding a blended one flat until the real
// value passes it. A QP whose counters are all lower is a new QP that got
// an old handle: its values are taken as they are.
func monotonic(old, cur *stats) (*stats, bool) {
	clamped := false
	keep := func(o, c value) value {
		if o.n == nil || (c.n != nil && c.counter() >= o.counter()) {
			return c
		}
		clamped = true
		return o
	}
	m := *cur
	m.values = make(map[string]value, len(cur.values))
	for k, v := range cur.values {
		m.values[k] = v
	}
	for _, c := range instanceCounters {
		if o, ok := old.values[c.key]; ok {
			m.values[c.key] = keep(o, cur.values[c.key])
		}
	}
	m.qps = make([]qpSection, len(cur.qps))
	for i, q := range cur.qps {
		m.qps[i] = qpSection{handle: q.handle, values: make(map[string]value, len(q.values))}
		for k, v := range q.values {
			m.qps[i].values[k] = v
		}
		oq := old.qp(q.handle)
		if oq == nil || renewed(oq, &q) {
			continue
		}
		for _, c := range qpCounters {
			if o, ok := oq.values[c.key]; ok {
				m.qps[i].values[c.key] = keep(o, q.values[c.key])
			}
		}
	}
	ol := make(map[string]value, len(old.lif))
	for _, l := range old.lif {
		ol[l.name] = l.v
	}
	m.lif = make([]lifValue, len(cur.lif))
	for i, l := range cur.lif {
		m.lif[i] = l
		if o, ok := ol[l.name]; ok {
			m.lif[i].v = keep(o, l.v)
		}
	}
	return &m, clamped
}

// renewed reports whether every counter the two sections both have is
// lower in cur (and at least one is): a new QP, not a torn read, which
// leaves counters equal or higher.
func renewed(old, cur *qpSection) bool {
	n := 0
	for _, c := range qpCounters {
		o, ok1 := old.values[c.key]
		v, ok2 := cur.values[c.key]
		if !ok1 || !ok2 || o.n == nil || v.n == nil {
			continue
		}
		if v.counter() >= o.counter() {
			return false
		}
		n++
	}
	return n > 0
}

// sweep forgets the instances not seen since the last sweep (removed from
// the manifest), so the keeper's memory follows the manifest.
func (k *keeper) sweep() {
	for id, e := range k.byID {
		if !e.seen {
			delete(k.byID, id)
		}
		e.seen = false
	}
}

// backwards reports whether any counter of cur is lower than in old: the
// write count, the device keys, the QPs and LIF lines present in both.
func backwards(old, cur *stats) bool {
	if lower(old.get(keyWriteCount), cur.get(keyWriteCount)) {
		return true
	}
	for _, c := range instanceCounters {
		if lower(old.get(c.key), cur.get(c.key)) {
			return true
		}
	}
	for _, oq := range old.qps {
		cq := cur.qp(oq.handle)
		if cq == nil {
			continue
		}
		for _, c := range qpCounters {
			if lower(oq.values[c.key], cq.values[c.key]) {
				return true
			}
		}
	}
	cl := make(map[string]value, len(cur.lif))
	for _, l := range cur.lif {
		cl[l.name] = l.v
	}
	for _, l := range old.lif {
		if v, ok := cl[l.name]; ok && lower(l.v, v) {
			return true
		}
	}
	return false
}

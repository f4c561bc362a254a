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
//   - keeper remembers, per instance, the last accepted file of the current
//     server process and refuses a read that is incomplete, lost the LIF
//     block, or has any counter lower than the accepted one: the accepted
//     values are exported again and the event is counted.
//
// A server restart is a new process (another pid, or the same pid with
// another start time): its counters start again from zero, and that reset
// is exported as it is, so rate() sees a real reset. A server that lowers
// its own counters without restarting is believed after
// resetConfirmations consecutive complete reads that agree with each
// other.

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
	case backwards(e.accepted, s):
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
		e.accepted, e.pending, e.pendingN = s, nil, 0
	}
	return e.accepted, e.torn
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
	lower := func(a, b value) bool { return b.counter() < a.counter() }
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

package guard

import "testing"

// Merge sizes a family's seenSet from the samples its inputs hold, so the
// slice-to-map switch is a safety net Merge itself does not reach: test
// the set directly across it.
func TestSeenSetAcrossTheSwitch(t *testing.T) {
	for _, n := range []int{0, 1, smallSeen - 1, smallSeen, smallSeen + 1, 5 * smallSeen} {
		var s seenSet
		s.init(1) // sized too small on purpose
		for i := range n {
			if _, ok := s.get(uint64(i) * 7919); ok {
				t.Fatalf("n=%d: %d seen before it was put", n, i)
			}
			s.put(uint64(i)*7919, ref{part: 1, sample: int32(i)})
		}
		for i := range n {
			r, ok := s.get(uint64(i) * 7919)
			if !ok || r.sample != int32(i) {
				t.Errorf("n=%d: hash %d: %v %v, want sample %d", n, i, r, ok, i)
			}
		}
		if _, ok := s.get(1); ok && n > 0 {
			t.Errorf("n=%d: a hash never put is seen", n)
		}
	}
}

// A table given back after a merge (release) comes back empty to the next
// set, and a sum of 0, which marks a table's empty slots, is a member like
// any other.
func TestSeenSetTablesReusedAndZero(t *testing.T) {
	for round := range 3 {
		var s seenSet
		s.init(1000)
		if _, ok := s.get(0); ok {
			t.Fatalf("round %d: 0 seen in a new set", round)
		}
		for i := range 1000 {
			if _, ok := s.get(uint64(i) * 7919); ok {
				t.Fatalf("round %d: %d seen before it was put", round, i)
			}
			s.put(uint64(i)*7919, ref{part: int32(round), sample: int32(i)})
		}
		for i := range 1000 {
			if r, ok := s.get(uint64(i) * 7919); !ok || r.sample != int32(i) || r.part != int32(round) {
				t.Fatalf("round %d: hash %d: %v %v", round, i, r, ok)
			}
		}
		// add: one probe finds what is there or records what is not
		for i := range 2000 {
			prev, dup := s.add(uint64(i)*7919, ref{part: -1, sample: int32(i)})
			if dup != (i < 1000) || (dup && (prev.sample != int32(i) || prev.part != int32(round))) {
				t.Fatalf("round %d: add %d: %v %v", round, i, prev, dup)
			}
		}
		if r, ok := s.get(1999 * 7919); !ok || r.part != -1 {
			t.Fatalf("round %d: added hash: %v %v", round, r, ok)
		}
		s.release()
	}
}

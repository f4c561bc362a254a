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

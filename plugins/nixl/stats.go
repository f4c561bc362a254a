package main

import "sort"

// agentStats is what the drained events of one agent add up to, kept in
// memory because draining consumes them: a scrape reads these sums, so
// scrapes are idempotent. It mirrors NIXL's exporters: a counter (sum of
// values) per event type, a gauge with the last value of the types that
// have one, and histograms of the two transfer times.
type agentStats struct {
	sum  [numEventTypes]uint64
	last [numEventTypes]uint64
	xfer histogram // agent_xfer_time_us
	post histogram // agent_xfer_post_time_us
}

func newAgentStats(bounds []float64) *agentStats {
	return &agentStats{xfer: newHistogram(bounds), post: newHistogram(bounds)}
}

// add accounts one event. t must be a valid event type.
func (s *agentStats) add(t eventType, v uint64) {
	s.sum[t] += v
	s.last[t] = v
	switch t {
	case evXferTime:
		s.xfer.observe(v)
	case evXferPostTime:
		s.post.observe(v)
	}
}

// clone copies s for a scrape, so that rendering runs without the lock.
func (s *agentStats) clone() *agentStats {
	c := *s
	c.xfer = s.xfer.clone()
	c.post = s.post.clone()
	return &c
}

// histogram is a classic histogram over µs values with inclusive upper
// bounds (a value equal to a bound counts in that bucket, as NIXL's).
type histogram struct {
	bounds []float64 // shared, never modified
	counts []uint64  // per bucket, not cumulative; the last one is +Inf
	sum    uint64
	count  uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v uint64) {
	f := float64(v)
	h.counts[sort.SearchFloat64s(h.bounds, f)]++ // first bound >= v: le is inclusive
	h.sum += v
	h.count++
}

func (h histogram) clone() histogram {
	c := h
	c.counts = append([]uint64(nil), h.counts...)
	return c
}

// cumulative fills dst (len(bounds)) with the cumulative counts of the
// finite buckets, the form the SDK's Writer takes.
func (h *histogram) cumulative(dst []uint64) []uint64 {
	dst = dst[:0]
	var n uint64
	for _, c := range h.counts[:len(h.bounds)] {
		n += c
		dst = append(dst, n)
	}
	return dst
}

package sdk

import "sync"

// Counts is a set of monotonic counters by the value of one label (a
// plugin's failures by collector, its limits reached by limit). The zero
// value is ready to use and safe for concurrent use: a background goroutine
// counts with Add while Collect writes. Keep it in a field that outlives a
// re-Configure, so the counters never go back.
type Counts struct {
	mu sync.Mutex
	n  map[string]uint64
}

// Add adds n to the counter of key.
func (c *Counts) Add(key string, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]uint64{}
	}
	c.n[key] += n
}

// Count is the counter of key so far (0 before its first Add).
func (c *Counts) Count(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// Write writes d, a counter with one label, for each of keys with its
// count: 0 for one never added to, so that rate() works from the first
// scrape on.
func (c *Counts) Write(w *Writer, d *Desc, keys ...string) {
	for _, k := range keys {
		w.Counter(d, float64(c.Count(k)), k)
	}
}

// CollectionErrors is a plugin's count of its partial failures by
// collector, the <name>_collection_errors_total{collector} counter of the
// plugin skeleton (plugins/README.md). Fail counts a failure and reports
// it to the host with Writer.Error in one call, so the plugin's counter and
// the host's plexporter_plugin_collect_errors_total agree. Add counts a
// failure without reporting it: one of a background goroutine that a later
// Collect reports once (or, where the plugin's README says so, never).
// Write exports the counter of each collector.
type CollectionErrors struct {
	Counts
}

// Fail counts err under collector and reports it with w.Error.
func (e *CollectionErrors) Fail(w *Writer, collector string, err error) {
	e.Add(collector, 1)
	w.Error(collector, err)
}

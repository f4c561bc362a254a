package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/plexporter/plexporter/sdk"
)

// What the emitter's sample and histogram return (enum
// plexporter_emit_result).
const (
	emitOK       = 0
	emitRejected = 1
	emitStop     = 2
)

// maxErrorsPerCollect bounds the distinct partial errors one collect
// reports; the rest are summed up in one more.
const maxErrorsPerCollect = 32

// The label-value cache holds the first maxInterned distinct values of at
// most maxInternedLen bytes, across collects: the few values that recur on
// many series (a device, a port) then allocate nothing. Measured at 100k
// series, a cache of every value cost more in map lookups than the
// allocations it saved (docs/performance.md).
const (
	maxInterned    = 1 << 10
	maxInternedLen = 64
)

// relay takes what a library emits during one collect and writes it to that
// collect's Writer. The library calls it on the plugin's C thread while
// Collect may give up on the library from another goroutine, so mu fences
// the Writer: after stop no emit reaches it.
type relay struct {
	collector string      // the library's name: the collector label
	descs     []*sdk.Desc // family index → descriptor

	mu       sync.Mutex
	w        *sdk.Writer // nil outside a collect and after stop
	refused  int         // samples refused this collect
	firstBad string      // why the first of them was
	errs     map[string]bool
	more     int // partial errors beyond maxErrorsPerCollect
	lv       []string
	interned map[string]string
	stage    stage // the emitter's (cgo builds), from the first collect on
}

// stage is what the cgo emitter stages samples in between its calls into
// Go (stage.h): the relay drains it before anything it writes or refuses
// and when the collect is given up on.
type stage interface {
	drain()          // mu held
	setStopped(bool) // mu held
}

// drainLocked writes what the emitter staged; mu is held.
func (r *relay) drainLocked() {
	if r.stage != nil {
		r.stage.drain()
	}
}

func newRelay(collector string, descs []*sdk.Desc) *relay {
	return &relay{collector: collector, descs: descs, errs: map[string]bool{}, interned: map[string]string{}}
}

// start opens a collect on w.
func (r *relay) start(w *sdk.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w, r.refused, r.firstBad, r.more = w, 0, "", 0
	clear(r.errs)
	if r.stage != nil {
		r.stage.setStopped(false)
	}
}

// stop closes the collect: from here on every emit is answered emitStop.
// It reports what the collect refused and returns the number of errors
// reported to the Writer during the collect, so the plugin's own counter
// matches the host's.
func (r *relay) stop() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage != nil {
		// What was staged before the collect was given up on is taken.
		r.stage.setStopped(true)
		r.drainLocked()
	}
	n := len(r.errs)
	if r.more > 0 {
		r.w.Error(r.collector, fmt.Errorf("%d more partial errors in this collect", r.more))
		n++
	}
	if r.refused > 0 {
		r.w.Error(r.collector, fmt.Errorf("refused %d samples the collector emitted; the first: %s", r.refused, r.firstBad))
		n++
	}
	r.w = nil
	return n
}

// admit checks one emitted sample against the catalogue; mu is held. The
// returned descriptor is nil unless the result is emitOK.
func (r *relay) admit(family uint32, nLabels int, histogram bool) (*sdk.Desc, int) {
	if r.w == nil {
		return nil, emitStop
	}
	if uint64(family) >= uint64(len(r.descs)) {
		return nil, r.refuse("family index %d, but the collector declares %d families", family, len(r.descs))
	}
	d := r.descs[family]
	if (d.Type == sdk.Histogram) != histogram {
		if histogram {
			return nil, r.refuse("family %s is not a histogram but was emitted as one", d.Name)
		}
		return nil, r.refuse("family %s is a histogram but was emitted as a single value", d.Name)
	}
	if nLabels != len(d.Labels) {
		return nil, r.refuse("family %s has %d label names but a sample has %d values", d.Name, len(d.Labels), nLabels)
	}
	return d, emitOK
}

func (r *relay) refuse(format string, args ...any) int {
	if r.refused == 0 {
		r.firstBad = fmt.Sprintf(format, args...)
	}
	r.refused++
	return emitRejected
}

// write writes one admitted value sample; mu is held.
func (r *relay) write(d *sdk.Desc, value float64, lv []string) {
	switch d.Type {
	case sdk.Counter:
		r.w.Counter(d, value, lv...)
	case sdk.Gauge:
		r.w.Gauge(d, value, lv...)
	default:
		r.w.Untyped(d, value, lv...)
	}
}

// writeHistogram writes one admitted histogram; mu is held.
func (r *relay) writeHistogram(d *sdk.Desc, bounds []float64, cumulative []uint64, count uint64, sum float64, lv []string) {
	r.w.Histogram(d, bounds, cumulative, count, sum, lv...)
}

// reportError records one partial failure the collector reported; mu is
// held. Identical messages count once per collect, as the Writer reports
// them once.
func (r *relay) reportError(msg string) {
	if r.w == nil || r.errs[msg] {
		return
	}
	if len(r.errs) >= maxErrorsPerCollect {
		r.more++
		return
	}
	r.errs[msg] = true
	r.w.Error(r.collector, errors.New(msg))
}

// intern returns b as a string, reusing a cached one for the same bytes:
// the lookup with string(b) does not allocate.
func (r *relay) intern(b []byte) string {
	if len(b) > maxInternedLen {
		return string(b)
	}
	if s, ok := r.interned[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.interned) < maxInterned {
		r.interned[s] = s
	}
	return s
}

// sample relays one value sample with label values already in Go memory
// (the cgo emitter converts them only once a sample is admitted).
func (r *relay) sample(family uint32, lv []string, value float64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, res := r.admit(family, len(lv), false)
	if res == emitOK {
		r.write(d, value, lv)
	}
	return res
}

// error relays one partial failure.
func (r *relay) error(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reportError(msg)
}

//go:build cgo

package main

// #include <stdint.h>
// #include "stage.h"
import "C"

import (
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// The emitter's direct paths into Go (dl.go's so_emit_*), called by the
// library during a collect with the relay's stage as ctx. Each drains the
// stage first, so that what it writes or refuses comes after the samples
// staged before it.

//export soEmitSample
func soEmitSample(s *C.struct_so_stage, family C.uint32_t, lv **C.char, n C.uint32_t, value C.double) C.int {
	r := cgo.Handle(s.relay).Value().(*relay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drainLocked()
	d, res := r.admit(uint32(family), int(n), false)
	if res != emitOK {
		return C.int(res)
	}
	r.write(d, float64(value), r.labelValues(lv, int(n)))
	return emitOK
}

//export soEmitHistogram
func soEmitHistogram(s *C.struct_so_stage, family C.uint32_t, lv **C.char, n C.uint32_t, bounds *C.double, cumulative *C.uint64_t, nb C.uint32_t, count C.uint64_t, sum C.double) C.int {
	r := cgo.Handle(s.relay).Value().(*relay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drainLocked()
	d, res := r.admit(uint32(family), int(n), true)
	if res != emitOK {
		return C.int(res)
	}
	if nb > 0 && (bounds == nil || cumulative == nil) {
		return C.int(r.refuse("family %s: %d buckets but no bucket arrays", d.Name, nb))
	}
	// Copied: the Writer may keep the slices past this call.
	b := append([]float64(nil), unsafe.Slice((*float64)(unsafe.Pointer(bounds)), int(nb))...)
	c := append([]uint64(nil), unsafe.Slice((*uint64)(unsafe.Pointer(cumulative)), int(nb))...)
	r.writeHistogram(d, b, c, uint64(count), float64(sum), r.labelValues(lv, int(n)))
	return emitOK
}

//export soEmitError
func soEmitError(s *C.struct_so_stage, msg *C.char) {
	r := cgo.Handle(s.relay).Value().(*relay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drainLocked()
	if msg == nil {
		r.reportError("the collector reported an error without a message")
		return
	}
	r.reportError(C.GoString(msg))
}

// soStageFlush hands a full stage to the goroutine waiting for the collect
// (dlLibrary.Collect), which drains and empties it, and waits for that:
// called by the emitter's sample() on the library's thread, the stage's
// only producer. The Writer's work then runs on an ordinary goroutine, as
// in a Go plugin, not on the library's locked thread, which hands its P
// over and back each time the garbage collector makes it yield.
//
//export soStageFlush
func soStageFlush(s *C.struct_so_stage) {
	st := cgo.Handle(s.relay).Value().(*relay).stage.(*cStage)
	st.full <- struct{}{}
	<-st.emptied
}

// cStage is the emitter's stage (stage.h) for relay r.
type cStage struct {
	c             *C.struct_so_stage
	r             *relay
	full, emptied chan struct{} // soStageFlush and the collect's goroutine
}

// empty drains the stage and empties it while its producer waits.
func (st *cStage) empty() {
	st.r.mu.Lock()
	defer st.r.mu.Unlock()
	st.drain()
	st.reset()
}

// drain writes the samples staged since the last drain to the relay's
// Writer, or drops them when the collect was given up on (the Writer is
// gone: nothing more is taken); the relay's mu is held. It may run on
// another thread than the producer's, which goes on writing past the
// published entries.
func (st *cStage) drain() {
	s, r := st.c, st.r
	n := atomic.LoadUint32((*uint32)(unsafe.Pointer(&s.n)))
	from := uint32(s.done)
	if from >= n {
		return
	}
	entries := s.entries[from:n]
	last := &entries[len(entries)-1]
	if r.w != nil {
		// One allocation for the label values of every drained sample: the
		// strings share it, and nothing writes it after this copy (the
		// Writer's encoder keeps them until its batch is sent).
		var slab []byte
		if b := int(last.bytes_end - s.done_bytes); b > 0 {
			slab = make([]byte, b)
			copy(slab, unsafe.Slice((*byte)(unsafe.Pointer(&s.bytes[s.done_bytes])), b))
		}
		lens := s.lens[s.done_lens:last.lens_end]
		li, at := 0, 0
		for i := range entries {
			e := &entries[i]
			d := r.descs[e.family] // family range, type and label count checked in C
			lv := r.lv[:0]
			for end := int(e.lens_end - s.done_lens); li < end; li++ {
				l := int(lens[li])
				v := ""
				if l > 0 {
					v = unsafe.String(&slab[at], l)
					at += l
				}
				lv = append(lv, v)
			}
			r.lv = lv
			r.write(d, float64(e.value), lv)
		}
	}
	s.done, s.done_lens, s.done_bytes = C.uint32_t(n), last.lens_end, last.bytes_end
}

// reset empties the stage; only while its producer waits (in
// soStageFlush, or collect has returned).
func (st *cStage) reset() {
	s := st.c
	s.n, s.nlens, s.nbytes, s.done, s.done_lens, s.done_bytes = 0, 0, 0, 0, 0, 0
}

// setStopped tells the emitter whether the collect was given up on: then
// every sample takes the direct path, which answers emitStop.
func (st *cStage) setStopped(stopped bool) {
	v := uint32(0)
	if stopped {
		v = 1
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&st.c.stopped)), v)
}

// soLibraryThread is the library's thread (so_start_library_thread): a
// goroutine on a C thread for as long as the callback lasts, which is
// forever, serving every call into the library.
//
//export soLibraryThread
func soLibraryThread(lib C.uintptr_t) {
	l := cgo.Handle(lib).Value().(*dlLibrary)
	for f := range l.calls {
		f()
	}
}

// labelValues copies n C strings into r's reused slice; mu is held.
func (r *relay) labelValues(lv **C.char, n int) []string {
	r.lv = r.lv[:0]
	if n == 0 {
		return r.lv
	}
	for _, p := range unsafe.Slice(lv, n) {
		if p == nil {
			r.lv = append(r.lv, "")
			continue
		}
		r.lv = append(r.lv, r.intern(cBytes(unsafe.Pointer(p))))
	}
	return r.lv
}

// cBytes views the NUL-terminated string at p without copying. It scans
// page by page, so it never reads past the page that holds the NUL.
func cBytes(p unsafe.Pointer) []byte {
	const page = 4096
	n := 0
	for {
		chunk := page - int((uintptr(p)+uintptr(n))%page)
		b := unsafe.Slice((*byte)(unsafe.Add(p, n)), chunk)
		for i, c := range b {
			if c == 0 {
				return unsafe.Slice((*byte)(p), n+i)
			}
		}
		n += chunk
	}
}

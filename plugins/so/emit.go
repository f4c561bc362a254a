//go:build cgo

package main

// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// The emitter's functions (struct plexporter_emitter), called by the
// library on its thread during a collect with the relay's handle as ctx.

//export soEmitSample
func soEmitSample(ctx C.uintptr_t, family C.uint32_t, lv **C.char, n C.uint32_t, value C.double) C.int {
	r := cgo.Handle(ctx).Value().(*relay)
	r.mu.Lock()
	defer r.mu.Unlock()
	d, res := r.admit(uint32(family), int(n), false)
	if res != emitOK {
		return C.int(res)
	}
	r.write(d, float64(value), r.labelValues(lv, int(n)))
	return emitOK
}

//export soEmitHistogram
func soEmitHistogram(ctx C.uintptr_t, family C.uint32_t, lv **C.char, n C.uint32_t, bounds *C.double, cumulative *C.uint64_t, nb C.uint32_t, count C.uint64_t, sum C.double) C.int {
	r := cgo.Handle(ctx).Value().(*relay)
	r.mu.Lock()
	defer r.mu.Unlock()
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
func soEmitError(ctx C.uintptr_t, msg *C.char) {
	r := cgo.Handle(ctx).Value().(*relay)
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg == nil {
		r.reportError("the collector reported an error without a message")
		return
	}
	r.reportError(C.GoString(msg))
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

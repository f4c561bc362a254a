package main

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ringWriter is NIXL's producer, re-stated for tests: it creates the file
// as the buffer exporter does (open O_CREAT|O_RDWR 0644, ftruncate to the
// exact size, map shared, write the header) and appends events with the
// same atomics: full when (write_pos+1)&mask == read_pos, slot first,
// then write_pos with release.
type ringWriter struct {
	data     []byte
	lay      slotLayout
	capacity uint64
	dropped  uint64 // events the ring had no room for
}

func newRingWriter(t testing.TB, path string, l slotLayout, capacity uint64) *ringWriter {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := headerSize + int(capacity)*l.size
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	w := &ringWriter{data: data, lay: l, capacity: capacity}
	t.Cleanup(w.close)
	le := binary.LittleEndian
	w.pos(offWritePos).Store(0)
	w.pos(offReadPos).Store(0)
	le.PutUint32(data[offVersion:], uint32(l.version))
	le.PutUint32(data[offVersion+4:], uint32(l.version))
	le.PutUint64(data[offCapacity:], capacity)
	le.PutUint64(data[offMask:], capacity-1)
	return w
}

func (w *ringWriter) pos(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&w.data[off]))
}

// write appends e, or drops it when the ring is full (as NIXL does) and
// reports false.
func (w *ringWriter) write(e event) bool {
	wp := w.pos(offWritePos).Load()
	next := (wp + 1) & (w.capacity - 1)
	if next == w.pos(offReadPos).Load() {
		w.dropped++
		return false
	}
	putSlot(w.data[headerSize+int(wp)*w.lay.size:][:w.lay.size], w.lay, e)
	w.pos(offWritePos).Store(next)
	return true
}

func (w *ringWriter) unread() uint64 {
	return (w.pos(offWritePos).Load() - w.pos(offReadPos).Load()) & (w.capacity - 1)
}

func (w *ringWriter) close() {
	if w.data != nil {
		unix.Munmap(w.data)
		w.data = nil
	}
}

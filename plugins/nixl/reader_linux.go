package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ringFile is the reader of one agent's ring: the file opened read-write
// (draining must store read_pos) and mapped shared, as NIXL's own readers
// do, so that read_pos and write_pos are accessed with the 64-bit atomics
// the writer pairs with (a pread/pwrite copy is not guaranteed to be one
// 8-byte access).
//
// A mapping faults (SIGBUS) when the file shrinks under it: a same-name
// agent restart with a smaller buffer truncates the file. Every drain
// therefore re-stats the descriptor and refuses a mapping larger than the
// file, and the remaining race (a truncate between that fstat and the
// copy) is turned into an error by debug.SetPanicOnFault around every
// access to the mapping: the reader reports "truncated", the plugin goes
// on. Events are copied out of the mapping before any of them is counted,
// so a fault never leaves half a batch counted.
type ringFile struct {
	path     string
	fd       int
	data     []byte // the whole file, mapped shared
	id       fileID
	lay      slotLayout
	capacity uint64
	mask     uint64
	lastRead uint64 // the read_pos this reader stored last
	drained  bool   // lastRead is meaningful
}

// fileID tells files apart across renames and re-creations.
type fileID struct{ dev, ino uint64 }

// errReopen asks the caller to map the file again: it grew, or its header
// now describes another ring (an agent of the same name restarted).
var errReopen = errors.New("ring changed shape")

func openRing(path string) (*ringFile, error) {
	// O_NONBLOCK: a FIFO planted in the directory must not block the
	// drain loop; O_NOFOLLOW: a symlink must not redirect our writes.
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
			return nil, &formatError{reason: reasonOpen, msg: fmt.Sprintf("open %s read-write: %v: draining stores read_pos, so the plugin needs write permission: run it as the agent's user or as a group that may write the file (see the plugin's README)", path, err)}
		}
		return nil, &formatError{reason: reasonOpen, msg: fmt.Sprintf("open %s: %v", path, err)}
	}
	r, err := mapRing(path, fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func mapRing(path string, fd int) (*ringFile, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &formatError{reason: reasonOpen, msg: fmt.Sprintf("stat %s: %v", path, err)}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, invalidHeader("%s is not a regular file", path)
	}
	var hb [headerSize]byte
	if st.Size >= headerSize {
		if n, err := unix.Pread(fd, hb[:], 0); err != nil || n != headerSize {
			return nil, &formatError{reason: reasonOpen, msg: fmt.Sprintf("read the header of %s: %d bytes, %v", path, n, err)}
		}
	}
	h := parseHeader(hb[:])
	lay, err := h.layout(st.Size)
	if err != nil {
		return nil, prefixed(path, err)
	}
	data, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &formatError{reason: reasonOpen, msg: fmt.Sprintf("mmap %s: %v", path, err)}
	}
	return &ringFile{
		path: path, fd: fd, data: data, id: fileID{dev: uint64(st.Dev), ino: st.Ino},
		lay: lay, capacity: h.capacity, mask: h.mask,
	}, nil
}

// prefixed puts the file's path in front of a format error's message.
func prefixed(path string, err error) error {
	var fe *formatError
	if errors.As(err, &fe) {
		return &formatError{reason: fe.reason, msg: path + ": " + fe.msg}
	}
	return fmt.Errorf("%s: %w", path, err)
}

func (r *ringFile) close() {
	if r.data != nil {
		_ = unix.Munmap(r.data)
		r.data = nil
	}
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
		r.fd = -1
	}
}

// drainResult is what one drain found.
type drainResult struct {
	header header // as loaded before consuming
	run    []byte // the consumed slots in ring order (valid until the next drain)
	moved  bool   // read_pos was not where this reader left it
}

// drain consumes every unread event: it copies the slots between read_pos
// and write_pos into scratch (which it may grow) and stores read_pos =
// write_pos. The caller decodes the copy. A file that is no longer what
// was mapped is an error: errReopen (grown, or another ring now), or a
// formatError with reason truncated or invalid_header.
//
// The header is read first (under the fault guard, like every access);
// only when there is something to copy is the file re-stated, so that an
// idle ring costs no system call.
func (r *ringFile) drain(scratch *[]byte) (res drainResult, err error) {
	return r.consume(scratch, r.checkSize)
}

// checkSize refuses a mapping larger than the file: reading past its end
// would fault.
func (r *ringFile) checkSize() error {
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return &formatError{reason: reasonOpen, msg: fmt.Sprintf("stat %s: %v", r.path, err)}
	}
	switch {
	case st.Size < int64(len(r.data)):
		return &formatError{reason: reasonTruncated, msg: fmt.Sprintf("%s shrank from %d to %d bytes under the reader", r.path, len(r.data), st.Size)}
	case st.Size > int64(len(r.data)):
		return errReopen
	}
	return nil
}

// consume is drain with the size check given; tests pass none to prove
// the fault guard on a truncated file.
func (r *ringFile) consume(scratch *[]byte, checkSize func() error) (res drainResult, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			fault, ok := p.(interface{ Addr() uintptr })
			if !ok {
				panic(p)
			}
			res = drainResult{}
			err = &formatError{reason: reasonTruncated, msg: fmt.Sprintf("%s: memory fault at %#x reading the mapping: the file shrank under the reader", r.path, fault.Addr())}
		}
	}()
	wpos := (*atomic.Uint64)(unsafe.Pointer(&r.data[offWritePos]))
	rpos := (*atomic.Uint64)(unsafe.Pointer(&r.data[offReadPos]))
	h := header{
		writePos: wpos.Load(), // acquire: the slots before it are written
		readPos:  rpos.Load(),
		version:  int32((*atomic.Uint32)(unsafe.Pointer(&r.data[offVersion])).Load()),
		capacity: (*atomic.Uint64)(unsafe.Pointer(&r.data[offCapacity])).Load(),
		mask:     (*atomic.Uint64)(unsafe.Pointer(&r.data[offMask])).Load(),
	}
	if h.version != r.lay.version || h.capacity != r.capacity || h.mask != r.mask {
		if _, lerr := h.layout(int64(len(r.data))); lerr != nil {
			return res, prefixed(r.path, lerr)
		}
		return res, errReopen // same size, another valid ring
	}
	if err := h.checkPositions(); err != nil {
		return res, prefixed(r.path, err)
	}
	res.header = h
	res.moved = r.drained && h.readPos != r.lastRead
	if h.writePos == h.readPos && !res.moved {
		return res, nil // nothing new, nothing to store
	}
	if err := checkSize(); err != nil {
		return drainResult{}, err
	}
	res.run = copyUnread((*scratch)[:0], r.data[headerSize:], r.lay, h.capacity, h.readPos, h.writePos)
	*scratch = res.run
	rpos.Store(h.writePos) // release: the copied slots are the writer's again
	r.lastRead, r.drained = h.writePos, true
	return res, nil
}

// probeFile reads what tells a file's state without opening it for
// writing: identity, size and header bytes. A rejected or expired file is
// looked at again only when this changes.
func probeFile(path string) (fileSig, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return fileSig{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileSig{}, err
	}
	sig := fileSig{id: fileID{dev: uint64(st.Dev), ino: st.Ino}, size: st.Size}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size >= headerSize {
		if _, err := unix.Pread(fd, sig.header[:], 0); err != nil {
			return fileSig{}, err
		}
	}
	return sig, nil
}

// statID is the identity of the file path names now.
func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// openElsewhere tells whether another open file description has the ring
// open for writing: the agent does for its whole life, since its shared
// mapping keeps the O_RDWR file it mapped (even after closing the
// descriptor). The kernel answers through a write lease, which it grants
// only when the requester's is the file's sole open for writing; granted,
// it is dropped at once. An error means the probe cannot answer: EACCES
// for a plugin that is not the file's owner (leases need ownership or
// CAP_LEASE), EINVAL on a filesystem without leases.
func (r *ringFile) openElsewhere() (bool, error) {
	_, err := unix.FcntlInt(uintptr(r.fd), unix.F_SETLEASE, unix.F_WRLCK)
	switch {
	case err == nil:
		_, _ = unix.FcntlInt(uintptr(r.fd), unix.F_SETLEASE, unix.F_UNLCK)
		return false, nil
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY):
		return true, nil
	}
	return false, err
}

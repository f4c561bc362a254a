// Package sysfs reads sysfs attributes the way every plexporter plugin
// needs them: one small file per read, bounded in size, as a label value
// (Clean) or as a counter (ParseCounter); and lists sysfs directories, a
// missing one as empty, numbered entries (nvme10, ports/2) in numeric order
// (Names, Numbered).
//
// A sysfs attribute is at most one page and is produced whole by a single
// show() call, so a bounded read into a reused buffer is both the correct
// and the fast way to read one: Buffer.Read does it with raw syscalls into
// caller-owned memory, which a collect that reads thousands of counter
// files needs (see Buffer).
package sysfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// MaxAttrSize is the largest attribute a read accepts: sysfs show()
// callbacks write into one page, and every attribute the plugins read
// (counters, states, identity strings) is far smaller.
const MaxAttrSize = 4096

// Buffer is scratch space for one attribute read. A caller that reads many
// files declares one (on its stack or in a per-goroutine struct) and reuses
// it, so a read allocates nothing. A Buffer is not safe for concurrent use.
type Buffer [MaxAttrSize + 1]byte

// ErrNotAvailable marks an attribute whose text starts with "N/A": the
// kernel has no value for it (an RDMA device without a PMA prints
// "N/A (no PMA)" in every counters/ file). It is "no sample", not a failure.
var ErrNotAvailable = errors.New("N/A: the kernel has no value for this attribute")

// ReadAttr reads one attribute as a label value: see Clean. An attribute
// larger than MaxAttrSize is refused with an error naming the path.
func ReadAttr(path string) (string, error) {
	var buf Buffer
	b, err := buf.Read(path)
	if err != nil {
		return "", err
	}
	return Clean(b), nil
}

// Clean turns the bytes of an attribute into a label value: invalid UTF-8
// (label values must be UTF-8) is replaced with U+FFFD, then the trailing
// newline, the space padding of fixed-width fields (NVMe model and serial,
// for example) and NUL bytes are trimmed from both ends.
func Clean(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.TrimFunc(s, func(r rune) bool { return r == 0 || unicode.IsSpace(r) })
}

// ReadCounter reads a counter attribute and parses it with ParseCounter;
// errors name the path.
func (buf *Buffer) ReadCounter(path string) (uint64, error) {
	b, err := buf.Read(path)
	if err != nil {
		return 0, err
	}
	v, err := ParseCounter(b)
	if err != nil && !errors.Is(err, ErrNotAvailable) {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, err
}

// ParseCounter parses the text of a counter attribute: an unsigned decimal
// number followed by at most one newline. Anything else (empty, garbage,
// binary, signs, hex, spaces, values beyond 2^64-1) is an error, because a
// counter that is not exactly what the kernel prints must not become a
// sample. Text starting with "N/A" is ErrNotAvailable.
func ParseCounter(b []byte) (uint64, error) {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if len(b) == 0 {
		return 0, errors.New("empty counter file")
	}
	if len(b) >= 3 && string(b[:3]) == "N/A" {
		return 0, ErrNotAvailable
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not an unsigned decimal: %q", truncate(b, 32))
		}
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter out of range: %q", truncate(b, 32))
	}
	return v, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

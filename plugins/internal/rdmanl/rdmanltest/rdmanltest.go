// Package rdmanltest reads the RDMA netlink captures the rdma and
// attribution plugins' tests replay (testdata/*.bin: netlink datagrams as
// the kernel sent them, recorded on real kernels).
package rdmanltest

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/mdlayher/netlink"
)

// ReadMessages splits a capture of one or more netlink messages into
// messages (each padded to 4 bytes, as the kernel aligns them); a
// truncated or malformed capture fails the test.
func ReadMessages(t testing.TB, path string) []netlink.Message {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []netlink.Message
	for len(b) > 0 {
		if len(b) < 16 {
			t.Fatalf("%s: trailing %d bytes", path, len(b))
		}
		l := int(binary.NativeEndian.Uint32(b))
		if l < 16 || l > len(b) {
			t.Fatalf("%s: bad message length %d", path, l)
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:l]); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
		b = b[min((l+3)&^3, len(b)):]
	}
	return out
}

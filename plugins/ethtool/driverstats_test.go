package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDecodeRealBuffers decodes the raw ETHTOOL_GSTRINGS / ETHTOOL_GSTATS
// buffers captured from a 6.1 kernel and compares them with the text the
// same capture printed.
func TestDecodeRealBuffers(t *testing.T) {
	for _, drv := range []string{"virtio", "e1000e"} {
		sb, _ := os.ReadFile("testdata/" + drv + "_gstrings.bin")
		vb, _ := os.ReadFile("testdata/" + drv + "_gstats.bin")
		txt, _ := os.ReadFile("testdata/" + drv + "_gstats.txt")
		names, err := decodeGStrings(sb)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := decodeGStats(vb)
		if err != nil {
			t.Fatal(err)
		}
		want, err := parseEthtoolText(string(txt))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != len(want.Names) || len(vals) != len(want.Values) {
			t.Fatalf("%s: %d names %d values, want %d", drv, len(names), len(vals), len(want.Names))
		}
		for i := range names {
			if names[i] != want.Names[i] || vals[i] != want.Values[i] {
				t.Errorf("%s[%d]: %s=%d, want %s=%d", drv, i, names[i], vals[i], want.Names[i], want.Values[i])
			}
		}
	}
}

func TestDecodeTruncated(t *testing.T) {
	sb, _ := os.ReadFile("testdata/virtio_gstrings.bin")
	if _, err := decodeGStrings(sb[:len(sb)-1]); err == nil || !strings.Contains(err.Error(), "header says 14") {
		t.Errorf("truncated string table: %v", err)
	}
	vb, _ := os.ReadFile("testdata/virtio_gstats.bin")
	if _, err := decodeGStats(vb[:len(vb)-8]); err == nil {
		t.Error("truncated stats accepted")
	}
	if _, err := decodeGStats(nil); err == nil {
		t.Error("empty stats accepted")
	}
	// A name filling all 32 bytes has no NUL terminator.
	buf := make([]byte, 12+32)
	binary.NativeEndian.PutUint32(buf[8:], 1)
	copy(buf[12:], strings.Repeat("x", 32))
	names, err := decodeGStrings(buf)
	if err != nil || names[0] != strings.Repeat("x", 32) {
		t.Errorf("full-width name: %q %v", names, err)
	}
}

// addCaptures seeds a fuzz test with captured kernel buffers.
func addCaptures(f *testing.F, paths ...string) {
	f.Helper()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzDecodeGStrings(f *testing.F) {
	addCaptures(f, "testdata/virtio_gstrings.bin", "testdata/e1000e_gstrings.bin")
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := decodeGStrings(b)
		if err != nil {
			return
		}
		if len(names)*ethGStringLen > len(b) {
			t.Fatalf("%d names from %d bytes", len(names), len(b))
		}
		for _, n := range names {
			if len(n) > ethGStringLen || strings.IndexByte(n, 0) >= 0 {
				t.Fatalf("bad name %q", n)
			}
		}
	})
}

func FuzzDecodeGStats(f *testing.F) {
	addCaptures(f, "testdata/virtio_gstats.bin", "testdata/e1000e_gstats.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := decodeGStats(b)
		if err != nil {
			return
		}
		if 8+len(vals)*8 > len(b) {
			t.Fatalf("%d values from %d bytes", len(vals), len(b))
		}
	})
}

func FuzzSplitQueue(f *testing.F) {
	for _, s := range []string{"rx_queue_0_packets", "rx1_bytes", "ch0_arm", "tx_3_pkts", "[1]: rx_bytes", "rx_64_bytes_phy", "rx_prio3_pause"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		q, s, ok := splitQueue(name)
		if !ok {
			return
		}
		if q == "" || s == "" || strings.Trim(q, "0123456789") != "" {
			t.Fatalf("%q split into %q / %q", name, q, s)
		}
	})
}

// The memo answers as splitQueue does, from the first call on and from
// the memo after, and is forgotten rather than grown past its bound.
func TestQueueSplitsMemo(t *testing.T) {
	m := queueSplits{}
	for range 2 {
		for _, name := range []string{"rx0_packets", "tx_queue_3_bytes", "rx-12.drops", "rx_65_to_127_bytes_phy", "tx_bytes"} {
			q, s, ok := m.split(name)
			wq, ws, wok := splitQueue(name)
			if q != wq || s != ws || ok != wok {
				t.Errorf("split(%q) = %q, %q, %v; splitQueue says %q, %q, %v", name, q, s, ok, wq, ws, wok)
			}
		}
	}
	if len(m) != 5 {
		t.Errorf("%d names memoized, want 5", len(m))
	}
	for i := range maxQueueSplits + 10 {
		m.split(fmt.Sprintf("rx%d_x", i))
	}
	if len(m) > maxQueueSplits {
		t.Errorf("memo grew to %d names, bound %d", len(m), maxQueueSplits)
	}
}

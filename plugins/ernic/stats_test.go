package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fixtureStats returns the .stats files of the shared run directory.
func fixtureStats(t testing.TB) map[string][]byte {
	t.Helper()
	root := sdktest.Unpack(t, "testdata/ernic-run.ttar")
	out := map[string][]byte{}
	for _, id := range []string{"1", "2", "3"} {
		data, err := os.ReadFile(filepath.Join(root, "run", "rocm-ernic", id+".stats"))
		if err != nil {
			t.Fatal(err)
		}
		out[id] = data
	}
	return out
}

func TestParseFixture(t *testing.T) {
	s := parseStats(fixtureStats(t)["1"])
	if !s.complete || !s.hasLIF || len(s.lif) != 74 {
		t.Fatalf("complete %v, LIF %v with %d lines", s.complete, s.hasLIF, len(s.lif))
	}
	if got := s.get("connection").text; got != "connected" {
		t.Errorf("connection %q", got)
	}
	if got := s.get(keyWriteCount).counter(); got != 4821 {
		t.Errorf("write count %v", got)
	}
	var handles []string
	for _, q := range s.qps {
		handles = append(handles, q.handle)
	}
	if strings.Join(handles, ",") != "17,18,1" {
		t.Errorf("QPs %v, want file order 17,18,1", handles)
	}
	// The opcode lines are not QP keys.
	if _, ok := s.qp("17").values["RDMA_WRITE"]; ok {
		t.Error("opcode line read as a QP key")
	}
	// The LIF block does not leak into the device keys, nor into the last QP.
	if _, ok := s.values["rx_ucast_bytes"]; ok {
		t.Error("LIF line read as a device key")
	}
	if _, ok := s.qp("1").values["rx_ucast_bytes"]; ok {
		t.Error("LIF line read as a key of the last QP")
	}
}

func TestParseValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64 // as a counter
		isN  bool
	}{
		{"1290", 1290, true},
		{" 007 ", 7, true},
		{"1_000", 1000, true},
		{"+5", 5, true},
		{"-5", 0, true}, // negative: an integer, but no counter
		{"18446744073709551615", 1.8446744073709552e19, true}, // 2^64-1, the driver's "bad offset"
		{"18446744073709551616", 1.8446744073709552e19, true}, // 2^64: beyond u64, kept as Python does
		{strings.Repeat("9", 400), 0, true},                   // beyond float64: 0
		{"4O96", 0, false},
		{"1__0", 0, false},
		{"_1", 0, false},
		{"1_", 0, false},
		{"0x10", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"1.5", 0, false},
		{"connected (PCI FLR)", 0, false},
	} {
		v := parseValue(c.in)
		if got := v.counter(); got != c.want || (v.n != nil) != c.isN {
			t.Errorf("parseValue(%q) = %v (integer %v), want %v (integer %v)", c.in, got, v.n != nil, c.want, c.isN)
		}
	}
}

// TestParseQuirks: the odd files ernic-exporter's reading gives a meaning to.
func TestParseQuirks(t *testing.T) {
	const file = statsTitle + `
Instance:
  connection  : (not set)
Write count : 12

Device Statistics:
  commands                : 5
  interrupts              :
  reset_count             : 99999999999999999999

Per-QP Statistics:
  QP 0x1f:
    doorbell_send  : 3
    bytes_sent     :
    bytes_received : 7
  QP  7 :
    doorbell_send  : 1
  QP 7:
    doorbell_send  : 2
  QP :
    doorbell_send  : 4
  QP 9:
    wqes_processed : 9
    WQEs by opcode:
      SEND                  : 9
      (other opcodes)       : x
    cqes_posted : 1

no separator here
  garbage line : with : colons

`
	s := parseStats([]byte(file))
	// "bytes_sent :" strips to a header: it ends QP 0x1f, so bytes_received
	// lands among the device keys (the original's quirk).
	q := s.qp("0x1f")
	if q == nil || q.values["doorbell_send"].counter() != 3 {
		t.Fatalf("QP 0x1f: %+v", q)
	}
	if _, ok := q.values["bytes_received"]; ok {
		t.Error("bytes_received after an empty value still in QP 0x1f")
	}
	if s.get("bytes_received").counter() != 7 {
		t.Error("bytes_received not at device level")
	}
	// "QP  7 :" and "QP 7:" have one handle: the later section replaces the earlier.
	if q := s.qp("7"); q == nil || q.values["doorbell_send"].counter() != 2 {
		t.Errorf("QP 7: %+v", q)
	}
	if q := s.qp(""); q == nil || q.values["doorbell_send"].counter() != 4 {
		t.Errorf("QP with an empty handle: %+v", q)
	}
	if len(s.qps) != 4 {
		t.Errorf("%d QPs, want 4 (0x1f, 7, empty, 9)", len(s.qps))
	}
	// The opcode section runs to the blank line: cqes_posted is an opcode line.
	if _, ok := s.qp("9").values["cqes_posted"]; ok {
		t.Error("cqes_posted in the opcode section read as a QP key")
	}
	if s.get("connection").text != "(not set)" || s.get("reset_count").counter() != 1e20 {
		t.Errorf("connection %q, reset_count %v", s.get("connection").text, s.get("reset_count").counter())
	}
	// "interrupts :" is a header (no value, no sample source): it reads 0.
	if s.get("interrupts").counter() != 0 {
		t.Error("interrupts")
	}
	// A blank line ends the opcode section, not the QP; the split is at the
	// first separator.
	if v := s.qp("9").values["garbage line"]; v.text != "with : colons" {
		t.Errorf("split at the first separator: %q", v.text)
	}
}

// TestParseOlderWriter: an older server prints "Write count: N" (not
// parsed: the write count reads 0) and flr_reset_count; still complete.
func TestParseOlderWriter(t *testing.T) {
	data := strings.Replace(string(fixtureStats(t)["2"]), "Write count : 2210", "Write count: 2210", 1)
	data = strings.Replace(data, "reset_count ", "flr_reset_count ", 1)
	s := parseStats([]byte(data))
	if !s.complete || s.get(keyWriteCount).n != nil || s.get("reset_count").n != nil {
		t.Errorf("complete %v, write count %+v, reset_count %+v", s.complete, s.get(keyWriteCount), s.get("reset_count"))
	}
}

// TestCompleteness: every proper prefix of a fixture file (what a read
// during the server's rewrite sees) is incomplete or, cut at the blank line
// after a QP section, lacks the LIF block (which the keeper then refuses,
// TestKeeperRefusesEveryPrefix); the whole file is complete, and so is a
// file without QPs.
func TestCompleteness(t *testing.T) {
	for id, data := range fixtureStats(t) {
		if !parseStats(data).complete {
			t.Errorf("%s.stats: whole file not complete", id)
		}
		cuts := 0
		for i := range len(data) {
			s := parseStats(data[:i])
			if !s.complete {
				continue
			}
			if s.hasLIF || !strings.HasSuffix(string(data[:i]), "\n\n") {
				t.Errorf("%s.stats: the first %d of %d bytes look complete:\n%s", id, i, len(data), data[max(0, i-80):i])
			}
			cuts++
		}
		if cuts == 0 {
			t.Errorf("%s.stats: no cut between QP sections looks complete; the test lost its point", id)
		}
	}
	noQPs := statsTitle + "\n" + "Device Statistics:\n"
	for _, k := range deviceKeys {
		noQPs += "  " + k + " : 1\n"
	}
	noQPs += "\nPer-QP Statistics:\n  (no QPs created yet)\n"
	if !parseStats([]byte(noQPs)).complete {
		t.Error("a file without QPs is not complete")
	}
}

// FuzzParseStats: the parser never panics, is deterministic, and every
// value it yields is a finite, non-negative counter. Seeded with the
// fixture files and the quirks above; run it for longer with
// go test -run '^$' -fuzz FuzzParseStats -fuzztime 30s ./plugins/ernic.
func FuzzParseStats(f *testing.F) {
	for _, data := range fixtureStats(f) {
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte(statsTitle + "\nPer-QP Statistics:\n  QP 1:\n    bytes_sent : 1_0\n  QP 1:\n    x :\n"))
	f.Add([]byte("a : " + strings.Repeat("9", 30) + "\nLIF Statistics:\n rx : -1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := parseStats(data)
		again := parseStats(data)
		if s.complete != again.complete || len(s.qps) != len(again.qps) || len(s.lif) != len(again.lif) || len(s.values) != len(again.values) {
			t.Fatal("two parses of one input differ")
		}
		check := func(where string, v value) {
			if c := v.counter(); c < 0 || math.IsInf(c, 0) || math.IsNaN(c) {
				t.Fatalf("%s: counter %v", where, c)
			}
		}
		for k, v := range s.values {
			check(k, v)
		}
		seen := map[string]bool{}
		for _, q := range s.qps {
			if seen[q.handle] {
				t.Fatalf("QP %q twice", q.handle)
			}
			seen[q.handle] = true
			for k, v := range q.values {
				check(k, v)
			}
		}
		for _, l := range s.lif {
			check(l.name, l.v)
		}
		if s.complete && !strings.HasPrefix(string(data), statsTitle) {
			t.Fatal("complete without the title")
		}
	})
}

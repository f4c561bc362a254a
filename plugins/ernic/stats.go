package main

import (
	"bytes"
	"math"
	"math/big"
	"strings"
)

// The .stats file a rocm-ernic server rewrites about once a second. Its
// grammar and ernic-exporter's reading of it are described in README.md
// ("Statistics file"); parseStats follows that reading line for line so
// that odd files mean here what they mean to the original.

const (
	statsTitle    = "=== ROCm ERNIC Statistics ==="
	keyWriteCount = "Write count"
	keyConnection = "connection"
	noQPsLine     = "(no QPs created yet)"
	headerQPs     = "Per-QP Statistics:"
	headerLIF     = "LIF Statistics:"
	headerOpcodes = "WQEs by opcode:"
)

// deviceKeys are the device-level counters that every writer version
// prints before the per-QP header (older ones print flr_reset_count for
// reset_count and no total_ip_bytes_*); a file that lacks one is the end
// of an old text after the start of a new one.
var deviceKeys = []string{
	"commands", "bar0_reads", "bar0_writes", "uar_reads", "uar_writes", "mmio_reads_total", "mmio_writes_total",
	"interrupts", "total_bytes_sent", "total_bytes_received", "total_bytes_rdma_read", "total_bytes_rdma_write",
}

// value is one "key : value" right-hand side: an integer when Python's
// int() would accept it (how ernic-exporter decides), else the text.
type value struct {
	text string
	n    *big.Int // nil when text is not an integer
}

// counter is the value as a counter sample: ernic-exporter exports a
// missing or non-integer value as 0, and so does the plugin; a negative
// integer, which no u64 field of the server can print, is 0 too (a
// counter cannot be negative). Integers beyond 2^64 are kept, rounded to
// float64, as the original's Python int is; one beyond float64's range
// (over 308 digits), which the original fails the whole scrape on, is 0.
func (v value) counter() float64 {
	if v.n == nil || v.n.Sign() < 0 {
		return 0
	}
	return bigToFloat(v.n)
}

// bigToFloat rounds a non-negative integer to float64; beyond its range, 0.
func bigToFloat(n *big.Int) float64 {
	f, _ := new(big.Float).SetInt(n).Float64()
	if math.IsInf(f, 0) {
		return 0
	}
	return f
}

// qpSection is one "QP <handle>:" section.
type qpSection struct {
	handle string
	values map[string]value
}

// lifValue is one line of the LIF block, in file order.
type lifValue struct {
	name string
	v    value
}

// stats is one parsed .stats file.
type stats struct {
	values map[string]value // every key outside the QP and LIF sections
	qps    []qpSection      // in file order; a repeated handle replaces the earlier section
	lif    []lifValue       // the LIF block; a repeated name replaces the earlier line
	hasQPs bool             // the "Per-QP Statistics:" header was seen
	hasLIF bool             // the "LIF Statistics:" header was seen
	// complete is false for a file the server had not finished writing when
	// it was read (see isComplete).
	complete bool
}

// get returns the value of a key outside the QP and LIF sections.
func (s *stats) get(key string) value { return s.values[key] }

// qp returns the section of a handle, or nil.
func (s *stats) qp(handle string) *qpSection {
	for i := range s.qps {
		if s.qps[i].handle == handle {
			return &s.qps[i]
		}
	}
	return nil
}

// parseStats reads a .stats file the way ernic-exporter does: each line is
// stripped; a blank line ends the opcode sub-section; "QP <h>:" opens a QP
// section (handle = the text between, stripped); "WQEs by opcode:" opens
// the opcode sub-section, whose lines are not exported; any other line
// without " : " that ends with ":" is a section header and ends the QP
// section (this includes "key :" with an empty value, the original's
// quirk); other lines without " : " are ignored; "key : value" splits at
// the first " : ". Keys under "LIF Statistics:" form the LIF block. It
// never fails: what it cannot read it skips, as the original does.
func parseStats(data []byte) *stats {
	s := &stats{values: map[string]value{}}
	defer func(all []byte) { s.complete = isComplete(all, s) }(data)
	var (
		cur     *qpSection // the open QP section, or nil
		opcodes bool       // inside "WQEs by opcode:"
		inLIF   bool       // inside "LIF Statistics:"
	)
	for len(data) > 0 {
		var raw []byte
		raw, data, _ = bytes.Cut(data, []byte{'\n'})
		line := strings.TrimSpace(string(raw))
		switch {
		case line == "":
			opcodes = false
			continue
		case strings.HasPrefix(line, "QP ") && strings.HasSuffix(line, ":"):
			handle := strings.TrimSpace(line[len("QP ") : len(line)-1])
			s.qps = replaceQP(s.qps, qpSection{handle: handle, values: map[string]value{}})
			cur, opcodes, inLIF = &s.qps[len(s.qps)-1], false, false
			continue
		case line == headerOpcodes:
			opcodes = true
			continue
		}
		key, val, ok := strings.Cut(line, " : ")
		if !ok {
			if strings.HasSuffix(line, ":") { // a section header
				cur, opcodes = nil, false
				inLIF = line == headerLIF
				s.hasLIF = s.hasLIF || inLIF
				s.hasQPs = s.hasQPs || line == headerQPs
			}
			continue
		}
		if opcodes {
			continue // per-opcode counts are not exported
		}
		key = strings.TrimSpace(key)
		v := parseValue(val)
		switch {
		case cur != nil:
			cur.values[key] = v
		case inLIF:
			s.lif = setLIF(s.lif, key, v)
		default:
			s.values[key] = v
		}
	}
	return s
}

// replaceQP appends q, removing an earlier section with the same handle
// (the original keeps the last one).
func replaceQP(qps []qpSection, q qpSection) []qpSection {
	for i := range qps {
		if qps[i].handle == q.handle {
			qps = append(qps[:i], qps[i+1:]...)
			break
		}
	}
	return append(qps, q)
}

func setLIF(lif []lifValue, name string, v value) []lifValue {
	for i := range lif {
		if lif[i].name == name {
			lif[i].v = v
			return lif
		}
	}
	return append(lif, lifValue{name, v})
}

// parseValue applies Python's int() to the text after " : ": surrounding
// white space, an optional sign, decimal digits with single underscores
// between them, leading zeros allowed, any size. Only ASCII digits are
// accepted (Python also takes other Unicode digits; no server prints them).
func parseValue(text string) value {
	v := value{text: strings.TrimSpace(text)}
	digits := v.text
	neg := false
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		neg = digits[0] == '-'
		digits = digits[1:]
	}
	if digits == "" || digits[0] == '_' || digits[len(digits)-1] == '_' {
		return v
	}
	clean := make([]byte, 0, len(digits))
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		switch {
		case c >= '0' && c <= '9':
			clean = append(clean, c)
		case c == '_' && digits[i-1] != '_':
		default:
			return v
		}
	}
	n, ok := new(big.Int).SetString(string(clean), 10)
	if !ok {
		return v
	}
	if neg {
		n.Neg(n)
	}
	v.n = n
	return v
}

// isComplete tells whether a file is one the server finished writing. The
// server truncates the file and writes it again in place, so a read can
// see any prefix of the new text (or an empty file). A complete file
// starts with the title line, has every device key and the per-QP header, and ends where the server stops: a blank line after
// the last section, or the "(no QPs created yet)" line. (A cut exactly at
// the blank line between two sections after the per-QP header passes;
// the keeper's checks catch what they can of that, see keeper.go.)
func isComplete(data []byte, s *stats) bool {
	if !bytes.HasPrefix(data, []byte(statsTitle+"\n")) || !s.hasQPs {
		return false
	}
	for _, k := range deviceKeys {
		if _, ok := s.values[k]; !ok {
			return false
		}
	}
	if bytes.HasSuffix(data, []byte("\n\n")) {
		return true
	}
	last := data[:len(data)-1]
	if i := bytes.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	return bytes.HasSuffix(data, []byte("\n")) && strings.TrimSpace(string(last)) == noQPsLine
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// The mountstats parser is the plugin's own, and prometheus/procfs
// (Proc.MountStats) is its oracle in the tests rather than its engine,
// because procfs' types cannot say what the kernel did not print: an
// 8-number per-op line (kernels before the errors field) and a 9-number one
// ending in 0 both give Errors 0, an absent age: line gives Age 0, a 1-field
// bytes: line gives seven zero fields. Exporting those zeros is inventing
// values (docs/design.md). procfs also fails a whole file on one block it
// does not know and panics on rdma lines longer than it expects.
//
// The format (fs/proc_namespace.c show_vfsstat, fs/nfs/super.c
// nfs_show_stats, net/sunrpc/stats.c, net/sunrpc/xprtsock.c): a
// "device ... mounted on ... with fstype ..." header for every mount; for NFS
// a " statvers=" suffix and a block of tab-indented lines ended by an empty
// line.

// block is one NFS mount's statistics exactly as the kernel printed them.
type block struct {
	device     string // as printed (octal escapes kept)
	mountPoint string // as printed (octal escapes kept), the key into mountinfo
	ordinal    int    // position among all mounts of the file, NFS or not (= its line in mountinfo)
	fstype     string // nfs or nfs4
	statVers   string
	opts       map[string]string
	age        uint64
	hasAge     bool
	ageLine    bool   // an age: line was printed (readable or not)
	events     fields // eventNames order
	bytes      fields // byteFields order
	xprts      []xprt // in print order; a line that could not be read keeps its position
	ops        []op   // in print order
}

// op is one per-op line: name and its numbers (opFields order).
type op struct {
	name string // as printed, e.g. READ
	fields
}

// xprt is one "xprt:" line. proto is empty when the line could not be read.
type xprt struct {
	proto string
	fields
	layout *xprtLayout
}

// fields are a line's numbers as printed. get reports a field the kernel
// did not print, or printed in the range of a negative sum shown unsigned
// (see plausible), as absent.
type fields struct {
	v   []uint64
	bad uint64 // bit i: v[i] is implausible; only the first 64 fields are tracked
}

func (f fields) get(i int) (uint64, bool) {
	if i < 0 || i >= len(f.v) || (i < 64 && f.bad&(1<<i) != 0) {
		return 0, false
	}
	return f.v[i], true
}

// Field positions in a per-op line (net/sunrpc/stats.c _print_rpc_iostats);
// errors was appended by Linux 5.x (older kernels print 8 numbers).
const (
	opRequests = iota
	opTransmissions
	opMajorTimeouts
	opBytesSent
	opBytesReceived
	opQueueMs
	opRTTMs
	opExecuteMs
	opErrors
	opMinFields = opErrors // the numbers every kernel prints
)

// Field positions in the bytes: line (include/linux/nfs_iostat.h,
// enum nfs_stat_bytecounters).
const (
	bytesNormalRead = iota
	bytesNormalWrite
	bytesDirectRead
	bytesDirectWrite
	bytesServerRead
	bytesServerWrite
	bytesReadPages
	bytesWritePages
	bytesFields
)

// eventNames are the events: line's counters in the kernel's order
// (include/linux/nfs_iostat.h, enum nfs_stat_eventcounters), named as
// nfsiostat and the kernel's comments name them. Kernels since 2.6.37 print
// all 27; numbers a future kernel appends are ignored until named here.
var eventNames = []string{
	"inoderevalidate", "dentryrevalidate", "datainvalidate", "attrinvalidate",
	"vfsopen", "vfslookup", "vfsaccess", "vfsupdatepage", "vfsreadpage", "vfsreadpages",
	"vfswritepage", "vfswritepages", "vfsgetdents", "vfssetattr", "vfsflush", "vfsfsync",
	"vfslock", "vfsrelease", "congestionwait", "setattrtrunc", "extendwrite", "sillyrename",
	"shortread", "shortwrite", "delay", "pnfs_read", "pnfs_write",
}

// Positions of the events that have a family of their own (the Crusoe
// exporter's names).
const (
	eventCongestionWait = 18
	eventSillyRename    = 21
	eventShortRead      = 22
	eventShortWrite     = 23
	eventDelay          = 24
)

// xprtLayout says where each field of an xprt line of one transport is, -1
// for a field the transport does not have (xs_tcp_print_stats,
// xs_udp_print_stats, xprt_rdma_print_stats). statvers 1.0 kernels print
// neither max_slots nor sending_u/pending_u; rdma never does and appends its
// own counters, which are not exported.
type xprtLayout struct {
	port, bind, connect, idle, sends, recvs, badXids, reqU, bklogU, maxSlots, sendingU, pendingU int
	min10, min11                                                                                 int // numbers printed under statvers 1.0 and 1.1
}

var xprtLayouts = map[string]*xprtLayout{
	"tcp":  {port: 0, bind: 1, connect: 2, idle: 4, sends: 5, recvs: 6, badXids: 7, reqU: 8, bklogU: 9, maxSlots: 10, sendingU: 11, pendingU: 12, min10: 10, min11: 13},
	"udp":  {port: 0, bind: 1, connect: -1, idle: -1, sends: 2, recvs: 3, badXids: 4, reqU: 5, bklogU: 6, maxSlots: 7, sendingU: 8, pendingU: 9, min10: 7, min11: 10},
	"rdma": {port: 0, bind: 1, connect: 2, idle: 4, sends: 5, recvs: 6, badXids: 7, reqU: 8, bklogU: 9, maxSlots: -1, sendingU: -1, pendingU: -1, min10: 10, min11: 10},
}

// slots tells whether a line under statVers carries max_slots, sending_u
// and pending_u.
func (l *xprtLayout) slots(statVers string) bool { return l.maxSlots >= 0 && statVers != "1.0" }

// readMountstats reads and parses a mountstats file. errs are the lines
// and blocks that could not be read; everything else is kept.
func readMountstats(path string) (blocks []*block, errs []error, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	blocks, errs = parseMountstats(data)
	return blocks, errs, nil
}

// parseMountstats returns the NFS blocks of mountstats text. A line it
// cannot read (too few numbers for what the kernel prints, a number that is
// not one, an unknown transport) is reported and contributes nothing, so no
// field is ever filled with a value the kernel did not print.
func parseMountstats(data []byte) (blocks []*block, errs []error) {
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var cur *block
	inOps := false
	ordinal := 0
	end := func() {
		if cur != nil && !cur.ageLine {
			errs = append(errs, fmt.Errorf("mount %s: no age: line", unescapeOctal(cur.mountPoint)))
		}
		cur, inOps = nil, false
	}
	for s.Scan() {
		line := s.Text()
		ss := strings.Fields(line)
		if len(ss) == 0 {
			end()
			continue
		}
		if ss[0] == "device" && !strings.HasPrefix(line, "\t") {
			end()
			b, nfs, err := parseHeader(ss)
			ordinal++
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if nfs {
				b.ordinal = ordinal - 1
				cur = b
				blocks = append(blocks, b)
			}
			continue
		}
		if cur == nil {
			continue // a line of a block that is not NFS statistics
		}
		if err := cur.parseLine(ss, &inOps); err != nil {
			errs = append(errs, fmt.Errorf("mount %s: %w", unescapeOctal(cur.mountPoint), err))
		}
	}
	end()
	if err := s.Err(); err != nil {
		errs = append(errs, err)
	}
	return blocks, errs
}

// parseHeader parses a "device ..." line. nfs is false for a mount without
// NFS statistics (every non-NFS mount; errors only for a malformed line).
func parseHeader(ss []string) (b *block, nfs bool, err error) {
	if len(ss) < 8 || ss[2] != "mounted" || ss[3] != "on" || ss[5] != "with" || ss[6] != "fstype" {
		return nil, false, fmt.Errorf("malformed mountstats header %q", strings.Join(ss, " "))
	}
	if len(ss) < 9 || !strings.HasPrefix(ss[8], "statvers=") {
		return nil, false, nil
	}
	if ss[7] != "nfs" && ss[7] != "nfs4" {
		return nil, false, fmt.Errorf("mount %s: statistics of fstype %q are not parsed", unescapeOctal(ss[4]), ss[7])
	}
	return &block{device: ss[1], mountPoint: ss[4], fstype: ss[7], statVers: strings.TrimPrefix(ss[8], "statvers=")}, true, nil
}

func (b *block) parseLine(ss []string, inOps *bool) error {
	if *inOps {
		return b.parseOp(ss)
	}
	switch ss[0] {
	case "opts:":
		if len(ss) < 2 {
			return fmt.Errorf("empty opts: line")
		}
		b.opts = map[string]string{}
		for opt := range strings.SplitSeq(ss[1], ",") {
			k, v, _ := strings.Cut(opt, "=")
			b.opts[k] = v
		}
	case "age:":
		b.ageLine = true
		if len(ss) != 2 {
			return fmt.Errorf("age: line has %d fields, want 1", len(ss)-1)
		}
		n, err := strconv.ParseUint(ss[1], 10, 64)
		if err != nil {
			return fmt.Errorf("age: %w", err)
		}
		b.age, b.hasAge = n, true
	case "events:":
		f, err := parseFields("events", ss[1:], len(eventNames))
		if err != nil {
			return err
		}
		b.events = f
	case "bytes:":
		f, err := parseFields("bytes", ss[1:], bytesFields)
		if err != nil {
			return err
		}
		b.bytes = f
	case "xprt:":
		x, err := parseXprt(ss[1:], b.statVers)
		b.xprts = append(b.xprts, x) // a bad line keeps its position: later lanes keep their xprt_idx
		return err
	case "per-op":
		*inOps = true
	}
	return nil
}

func (b *block) parseOp(ss []string) error {
	name, ok := strings.CutSuffix(ss[0], ":")
	if !ok || name == "" {
		return fmt.Errorf("per-op line %q: no operation name", strings.Join(ss, " "))
	}
	f, err := parseFields("per-op "+name, ss[1:], opMinFields)
	if err != nil {
		return err
	}
	b.ops = append(b.ops, op{name: name, fields: f})
	return nil
}

// parseXprt reads an xprt line; its length must be what the transport
// prints under the block's statvers.
func parseXprt(ss []string, statVers string) (xprt, error) {
	if len(ss) == 0 {
		return xprt{}, fmt.Errorf("empty xprt: line")
	}
	l, ok := xprtLayouts[ss[0]]
	if !ok {
		return xprt{}, fmt.Errorf("xprt: unknown transport %q", ss[0])
	}
	want := l.min11
	if statVers == "1.0" {
		want = l.min10
	}
	f, err := parseFields("xprt "+ss[0], ss[1:], want)
	if err != nil {
		return xprt{}, fmt.Errorf("%w (statvers %s)", err, statVers)
	}
	return xprt{proto: ss[0], fields: f, layout: l}, nil
}

// parseFields parses a line's numbers; fewer than want is a truncated
// line. Numbers beyond want are kept (newer kernels append fields, so
// positions keep their meaning).
func parseFields(what string, ss []string, want int) (fields, error) {
	if len(ss) < want {
		return fields{}, fmt.Errorf("%s: %d numbers, the kernel prints at least %d", what, len(ss), want)
	}
	f := fields{v: make([]uint64, len(ss))}
	for i, s := range ss {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fields{}, fmt.Errorf("%s: field %d: %w", what, i+1, err)
		}
		f.v[i] = n
		if !plausible(n) && i < 64 {
			f.bad |= 1 << i
		}
	}
	return f, nil
}

// plausible is false for a value of 2^63 or more. The kernel keeps several
// sums (per-op times in ktime, xprt utilisations) in signed or wrapping
// arithmetic and prints them unsigned: a sum that went negative shows as
// about 1.8e19 (e.g. 18446743919241604546 ms). No NFS counter reaches 2^63
// honestly (9.2 EB, or 292 million years in ms), and exporting one poisons
// every rate() over it, so such a field gets no sample and is reported.
func plausible(n uint64) bool { return n <= math.MaxInt64 }

// implausible lists the fields of a block that plausible rejected, for the
// collect error that accompanies the missing samples.
func (b *block) implausible() []string {
	var out []string
	note := func(what string, f fields) {
		for i := range min(len(f.v), 64) {
			if f.bad&(1<<i) != 0 {
				out = append(out, fmt.Sprintf("%s field %d = %d", what, i+1, f.v[i]))
			}
		}
	}
	note("events", b.events)
	note("bytes", b.bytes)
	for _, x := range b.xprts {
		note("xprt "+x.proto, x.fields)
	}
	for _, o := range b.ops {
		note("per-op "+o.name, o.fields)
	}
	return out
}

// unescapeOctal undoes the kernel's mangle() of device and mount point names
// (space, tab, newline and backslash become \ooo).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			n := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(n)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// readMounts returns the mounts of a mountstats file.
//
// The file is parsed with prometheus/procfs (Proc.MountStats) whenever the
// path has procfs' shape, <root>/<pid|self>/mountstats, which is always the
// case on a real host. procfs is all-or-nothing per file, though: a single
// block it does not know (an xprt line of a transport it has no field count
// for, an events line of a kernel that added a counter, a header of a
// stats-printing filesystem other than nfs/nfs4) fails the whole file, and an
// rdma line longer than it expects makes it panic. Losing every mount of a
// host because of one odd block is not acceptable for a health exporter, so
// when procfs gives up we read the file again and parse it with
// parseMountstatsTolerant below, which yields the same procfs types but
// skips only the line or block it cannot read (each reported in errs).
func readMounts(path string) (mounts []*procfs.Mount, errs []error, err error) {
	if p, ok := procfsProc(path); ok {
		mounts, perr := procfsMountStats(p)
		if perr == nil {
			return mounts, nil, nil
		}
		if os.IsNotExist(perr) || os.IsPermission(perr) {
			return nil, nil, perr
		}
		// Fall through to the tolerant parser.
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	mounts, errs = parseMountstatsTolerant(data)
	return mounts, errs, nil
}

// procfsProc maps <root>/<pid|self>/mountstats to a procfs.Proc.
func procfsProc(path string) (procfs.Proc, bool) {
	if filepath.Base(path) != "mountstats" {
		return procfs.Proc{}, false
	}
	dir := filepath.Dir(path)
	root, pid := filepath.Dir(dir), filepath.Base(dir)
	fs, err := procfs.NewFS(root)
	if err != nil {
		return procfs.Proc{}, false
	}
	var p procfs.Proc
	if pid == "self" {
		p, err = fs.Self()
	} else {
		n, aerr := strconv.Atoi(pid)
		if aerr != nil {
			return procfs.Proc{}, false
		}
		p, err = fs.Proc(n)
	}
	return p, err == nil
}

// procfsMountStats calls procfs and turns its panics (index out of range on
// unexpected xprt lines) into errors.
func procfsMountStats(p procfs.Proc) (mounts []*procfs.Mount, err error) {
	defer func() {
		if r := recover(); r != nil {
			mounts, err = nil, fmt.Errorf("procfs mountstats parser panicked: %v", r)
		}
	}()
	return p.MountStats()
}

// parseMountstatsTolerant parses mountstats text into procfs' types. It
// follows the kernel's format (fs/proc_namespace.c show_vfsstat, fs/nfs/super.c
// nfs_show_stats, net/sunrpc/stats.c): a "device ..." header, for NFS a block
// of tab-indented lines ended by an empty line. Unlike procfs it reports and
// skips what it cannot read instead of failing the file, accepts events and
// bytes lines of any length (fields are appended by newer kernels, so
// position keeps its meaning) and any xprt field count.
func parseMountstatsTolerant(data []byte) (mounts []*procfs.Mount, errs []error) {
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var cur *procfs.MountStatsNFS
	var curMount *procfs.Mount
	inOps := false
	for s.Scan() {
		line := s.Text()
		ss := strings.Fields(line)
		if len(ss) == 0 {
			cur, inOps = nil, false
			continue
		}
		if ss[0] == "device" && !strings.HasPrefix(line, "\t") {
			cur, inOps = nil, false
			m, err := parseHeader(ss)
			if err != nil {
				errs = append(errs, err)
				curMount = nil
				continue
			}
			curMount = m
			mounts = append(mounts, m)
			if len(ss) > 8 && strings.HasPrefix(ss[8], "statvers=") {
				if m.Type != "nfs" && m.Type != "nfs4" {
					errs = append(errs, fmt.Errorf("mount %s: statistics of fstype %q are not parsed", m.Mount, m.Type))
					continue
				}
				cur = &procfs.MountStatsNFS{StatVersion: strings.TrimPrefix(ss[8], "statvers=")}
				m.Stats = cur
			}
			continue
		}
		if cur == nil {
			continue // a line of a block we skip
		}
		if err := parseStatsLine(cur, ss, &inOps); err != nil {
			errs = append(errs, fmt.Errorf("mount %s: %w", curMount.Mount, err))
		}
	}
	if err := s.Err(); err != nil {
		errs = append(errs, err)
	}
	return mounts, errs
}

func parseHeader(ss []string) (*procfs.Mount, error) {
	if len(ss) < 8 || ss[2] != "mounted" || ss[3] != "on" || ss[5] != "with" || ss[6] != "fstype" {
		return nil, fmt.Errorf("malformed mountstats header %q", strings.Join(ss, " "))
	}
	return &procfs.Mount{Device: ss[1], Mount: ss[4], Type: ss[7]}, nil
}

func parseStatsLine(st *procfs.MountStatsNFS, ss []string, inOps *bool) error {
	if *inOps {
		return parseOpLine(st, ss)
	}
	switch ss[0] {
	case "opts:":
		if len(ss) < 2 {
			return fmt.Errorf("empty opts line")
		}
		st.Opts = map[string]string{}
		for opt := range strings.SplitSeq(ss[1], ",") {
			k, v, _ := strings.Cut(opt, "=")
			st.Opts[k] = v
		}
	case "age:":
		if len(ss) < 2 {
			return fmt.Errorf("empty age line")
		}
		n, err := strconv.ParseUint(ss[1], 10, 64)
		if err != nil {
			return fmt.Errorf("age: %w", err)
		}
		st.Age = time.Duration(n) * time.Second
	case "events:":
		ns, err := parseUints(ss[1:])
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
		e := &st.Events
		fill(ns, &e.InodeRevalidate, &e.DnodeRevalidate, &e.DataInvalidate, &e.AttributeInvalidate,
			&e.VFSOpen, &e.VFSLookup, &e.VFSAccess, &e.VFSUpdatePage, &e.VFSReadPage, &e.VFSReadPages,
			&e.VFSWritePage, &e.VFSWritePages, &e.VFSGetdents, &e.VFSSetattr, &e.VFSFlush, &e.VFSFsync,
			&e.VFSLock, &e.VFSFileRelease, &e.CongestionWait, &e.Truncation, &e.WriteExtension,
			&e.SillyRename, &e.ShortRead, &e.ShortWrite, &e.JukeboxDelay, &e.PNFSRead, &e.PNFSWrite)
	case "bytes:":
		ns, err := parseUints(ss[1:])
		if err != nil {
			return fmt.Errorf("bytes: %w", err)
		}
		b := &st.Bytes
		fill(ns, &b.Read, &b.Write, &b.DirectRead, &b.DirectWrite, &b.ReadTotal, &b.WriteTotal, &b.ReadPages, &b.WritePages)
	case "xprt:":
		x, err := parseXprt(ss[1:])
		if err != nil {
			// Keep the position so that later lanes keep their xprt_idx;
			// a lane with an empty Protocol is not exported.
			st.Transport = append(st.Transport, procfs.NFSTransportStats{})
			return err
		}
		st.Transport = append(st.Transport, x)
	case "per-op":
		*inOps = true
	}
	return nil
}

// parseXprt maps an xprt line onto procfs' NFSTransportStats the way procfs
// does (udp has no connect_count/connect_time/idle_time; rdma has no
// max_slots/sending_u/pending_u and appends its own counters).
func parseXprt(ss []string) (procfs.NFSTransportStats, error) {
	x := procfs.NFSTransportStats{}
	if len(ss) < 2 {
		return x, fmt.Errorf("xprt: too few fields")
	}
	x.Protocol = ss[0]
	ns, err := parseUints(ss[1:])
	if err != nil {
		return x, fmt.Errorf("xprt %s: %w", x.Protocol, err)
	}
	switch x.Protocol {
	case "tcp":
		fill(ns, &x.Port, &x.Bind, &x.Connect, &x.ConnectIdleTime, &x.IdleTimeSeconds, &x.Sends, &x.Receives,
			&x.BadTransactionIDs, &x.CumulativeActiveRequests, &x.CumulativeBacklog, &x.MaximumRPCSlotsUsed,
			&x.CumulativeSendingQueue, &x.CumulativePendingQueue)
	case "udp":
		fill(ns, &x.Port, &x.Bind, &x.Sends, &x.Receives, &x.BadTransactionIDs, &x.CumulativeActiveRequests,
			&x.CumulativeBacklog, &x.MaximumRPCSlotsUsed, &x.CumulativeSendingQueue, &x.CumulativePendingQueue)
	case "rdma":
		fill(ns, &x.Port, &x.Bind, &x.Connect, &x.ConnectIdleTime, &x.IdleTimeSeconds, &x.Sends, &x.Receives,
			&x.BadTransactionIDs, &x.CumulativeActiveRequests, &x.CumulativeBacklog,
			&x.ReadChunkCount, &x.WriteChunkCount, &x.ReplyChunkCount, &x.TotalRdmaRequest, &x.PullupCopyCount,
			&x.HardwayRegisterCount, &x.FailedMarshalCount, &x.BadReplyCount, &x.MrsRecovered, &x.MrsOrphaned,
			&x.MrsAllocated, &x.EmptySendctxQ, &x.TotalRdmaReply, &x.FixupCopyCount, &x.ReplyWaitsForSend,
			&x.LocalInvNeeded, &x.NomsgCallCount, &x.BcallCount)
	default:
		return x, fmt.Errorf("xprt: unknown transport %q", x.Protocol)
	}
	return x, nil
}

func parseOpLine(st *procfs.MountStatsNFS, ss []string) error {
	name, ok := strings.CutSuffix(ss[0], ":")
	if !ok || name == "" {
		return fmt.Errorf("per-op line %q: no operation name", strings.Join(ss, " "))
	}
	if len(ss) < 9 {
		return fmt.Errorf("per-op %s: %d fields, want at least 8", name, len(ss)-1)
	}
	ns, err := parseUints(ss[1:])
	if err != nil {
		return fmt.Errorf("per-op %s: %w", name, err)
	}
	o := procfs.NFSOperationStats{Operation: name}
	fill(ns, &o.Requests, &o.Transmissions, &o.MajorTimeouts, &o.BytesSent, &o.BytesReceived,
		&o.CumulativeQueueMilliseconds, &o.CumulativeTotalResponseMilliseconds, &o.CumulativeTotalRequestMilliseconds, &o.Errors)
	st.Operations = append(st.Operations, o)
	return nil
}

func parseUints(ss []string) ([]uint64, error) {
	ns := make([]uint64, len(ss))
	for i, s := range ss {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	return ns, nil
}

// fill assigns ns to dst in order; extra values are ignored, missing ones stay 0.
func fill(ns []uint64, dst ...*uint64) {
	for i := range min(len(ns), len(dst)) {
		*dst[i] = ns[i]
	}
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

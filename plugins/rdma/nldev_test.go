package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"

	"github.com/plexporter/plexporter/plugins/internal/rdmanl/rdmanltest"
)

// exchangeFile is one recorded request and the files holding its replies.
type exchangeFile struct {
	req   string
	resps []string
}

// replay serves recorded exchanges: every request must be byte-identical to
// a recorded one (sequence and port id aside, which the kernel/iproute2 set
// per socket); the reply is the recorded one with the request's sequence.
// It fails the test on any request that is not in the table, and on any
// SET-type command.
type replay struct {
	t        testing.TB
	table    []exchangeFile
	override map[string][]netlink.Message // request key -> synthetic reply
	sent     []netlink.Message
}

func reqKey(m netlink.Message) string {
	m.Header.Sequence, m.Header.PID = 0, 0
	m.Header.Length = uint32(16 + len(m.Data))
	b, err := m.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (r *replay) fn(reqs []netlink.Message) ([]netlink.Message, error) {
	if reqs == nil {
		return nil, io.EOF
	}
	var out []netlink.Message
	for _, req := range reqs {
		r.sent = append(r.sent, req)
		op := int(req.Header.Type) & 0x3ff
		switch op {
		case 2, 3, 4, 7, 16, 18:
			r.t.Errorf("plugin sent a state-changing RDMA netlink command (op %d)", op)
			return nil, errors.New("forbidden")
		}
		key := reqKey(req)
		var reply []netlink.Message
		if rep, ok := r.override[key]; ok {
			reply = rep
		} else {
			for _, ex := range r.table {
				rec := rdmanltest.ReadMessages(r.t, ex.req)
				if len(rec) != 1 {
					r.t.Fatalf("%s: %d messages", ex.req, len(rec))
				}
				if reqKey(rec[0]) != key {
					continue
				}
				for _, f := range ex.resps {
					reply = append(reply, rdmanltest.ReadMessages(r.t, f)...)
				}
				break
			}
			if reply == nil {
				r.t.Errorf("unexpected request: type %d flags %#x data %x", req.Header.Type, req.Header.Flags, req.Data)
				return nltest.Error(int(22), []netlink.Message{req})
			}
		}
		for _, m := range reply {
			m.Header.Sequence = req.Header.Sequence
			m.Header.PID = nltest.PID
			out = append(out, m)
		}
	}
	return out, nil
}

func (r *replay) dial() (nlConn, error) { return nltest.Dial(r.fn), nil }

func synth(name string) string { return filepath.Join("testdata", "nl-synth", name) }
func real(name string) string  { return filepath.Join("testdata", "nl-real", name) }

func synthTable(statResp string) []exchangeFile {
	return []exchangeFile{
		{synth("req_get_dump.bin"), []string{synth("resp_get_dump.bin")}},
		{synth("req_stat_get_status_dev0_port1.bin"), []string{synth("resp_stat_get_status_dev0_port1.bin")}},
		{synth("req_stat_get_dev0_port1.bin"), []string{synth(statResp)}},
		{synth("req_stat_qp_dump_dev0_port1.bin"), []string{synth("resp_stat_qp_dump_dev0_port1.bin")}},
	}
}

// The recorded requests are what the plugin must send, byte for byte.
func TestRequestsAreByteExact(t *testing.T) {
	ctx := context.Background()
	devices := func(c *nldevClient) { _, _ = c.devices(ctx) }
	status := func(c *nldevClient) { _, _ = c.statStatus(ctx, 0, 1) }
	values := func(c *nldevClient) { _, _ = c.statValues(ctx, 0, 1) }
	mode := func(c *nldevClient) { _, _ = c.qpMode(ctx, 0, 1) }
	qpDump := func(c *nldevClient) { _, _ = c.qpSets(ctx, 0, 1) }
	for _, c := range []struct {
		file string
		run  func(*nldevClient)
	}{
		{synth("req_get_dump.bin"), devices},
		{real("req_get_dump.bin"), devices},
		{synth("req_stat_get_status_dev0_port1.bin"), status},
		{real("req_stat_get_status_rxe0_p1.bin"), status},
		{synth("req_stat_get_dev0_port1.bin"), values},
		{real("req_stat_get_rxe0_p1.bin"), values},
		{real("req_stat_get_qp_mode_rxe0_p1.bin"), mode},
		{real("req_stat_qp_dump_rxe0_p1.bin"), qpDump},
		{synth("req_stat_qp_dump_dev0_port1.bin"), qpDump},
	} {
		rec := rdmanltest.ReadMessages(t, c.file)[0]
		var got netlink.Message
		c.run(&nldevClient{conn: nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
			if reqs != nil {
				got = reqs[0]
			}
			return nil, io.EOF
		})})
		got.Header.Sequence, got.Header.PID = rec.Header.Sequence, rec.Header.PID
		gb, _ := got.MarshalBinary()
		want, _ := os.ReadFile(c.file)
		if !bytes.Equal(gb, want) {
			t.Errorf("%s: request\n got %x\nwant %x", c.file, gb, want)
		}
	}
}

func TestExchangeRefusesSet(t *testing.T) {
	called := false
	cl := &nldevClient{conn: nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		called = true
		return nil, io.EOF
	})}
	ctx := context.Background()
	for _, op := range []int{2, 3, 4, 7, 16, 18} {
		if _, err := request(op, flagsDoit, nil); err == nil {
			t.Errorf("op %d: request built", op)
		}
		m := netlink.Message{Header: netlink.Header{Type: nldevType(op), Flags: flagsDoit}}
		if _, err := cl.get(ctx, m); err == nil {
			t.Errorf("op %d was accepted by get", op)
		}
		if _, err := cl.dump(ctx, m); err == nil {
			t.Errorf("op %d was accepted by dump", op)
		}
		if _, err := cl.dumpWithin(ctx, m, 1, 1); err == nil {
			t.Errorf("op %d was accepted by dumpWithin", op)
		}
	}
	// Another RDMA netlink client than NLDEV (RDMA_NL_LS = 4) is refused too.
	if _, err := cl.get(ctx, netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(4<<10 | cmdGet)}}); err == nil {
		t.Error("a non-NLDEV message was accepted")
	}
	if called {
		t.Error("a forbidden request reached the socket")
	}
}

// Real 6.1 captures: device list, status (no optional counters on rxe),
// values, and the error shapes.
func TestRealCaptureReplies(t *testing.T) {
	r := &replay{t: t, table: []exchangeFile{
		{real("req_get_dump.bin"), []string{real("resp_get_dump_01.bin"), real("resp_get_dump_02.bin")}},
		{real("req_stat_get_status_rxe0_p1.bin"), []string{real("resp_stat_get_status_rxe0_p1_01.bin"), real("resp_stat_get_status_rxe0_p1_02.bin")}},
		{real("req_stat_get_rxe0_p1.bin"), []string{real("resp_stat_get_rxe0_p1_01.bin"), real("resp_stat_get_rxe0_p1_02.bin")}},
		{real("req_stat_get_qp_mode_rxe0_p1.bin"), []string{real("resp_stat_get_qp_mode_rxe0_p1_01.bin"), real("resp_stat_get_qp_mode_rxe0_p1_02.bin")}},
		{real("req_stat_get_rxe0_badport2.bin"), []string{real("resp_stat_get_rxe0_badport2_01.bin")}},
		{real("req_stat_qp_dump_rxe0_p1.bin"), []string{real("resp_stat_qp_dump_rxe0_p1_01.bin")}},
	}}
	conn, _ := r.dial()
	cl := &nldevClient{conn: conn}
	ctx := context.Background()
	devs, err := cl.devices(ctx)
	if err != nil || len(devs) != 1 || devs[0] != (nlDevice{index: 0, name: "rxe0", ports: 1}) {
		t.Fatalf("devices = %+v, %v", devs, err)
	}
	st, err := cl.statStatus(ctx, 0, 1)
	if err != nil || len(st) != 15 {
		t.Fatalf("status: %d entries, %v", len(st), err)
	}
	for _, s := range st {
		if s.dynamic {
			t.Errorf("rxe counter %s reported as optional", s.name)
		}
	}
	if st[14].name != "rdma_recvs" || st[14].index != 14 {
		t.Errorf("last status entry = %+v", st[14])
	}
	vals, err := cl.statValues(ctx, 0, 1)
	if err != nil || len(vals) != 15 {
		t.Fatalf("values: %d, %v", len(vals), err)
	}
	if vals[0].name != "sent_pkts" || vals[0].value != 125 || vals[13].name != "rdma_sends" || vals[13].value != 45 {
		t.Errorf("values = %+v", vals)
	}
	mode, err := cl.qpMode(ctx, 0, 1)
	if err != nil || mode.name() != "none" || mode.maskType || mode.maskPID {
		t.Errorf("qp mode = %+v, %v", mode, err)
	}
	sets, err := cl.qpSets(ctx, 0, 1)
	if err != nil || len(sets) != 0 {
		t.Errorf("empty QP dump = %+v, %v", sets, err)
	}
	// Port 2 of a 1-port device: NLMSG_ERROR -EINVAL.
	if _, err := cl.statValues(ctx, 0, 2); err == nil {
		t.Error("EINVAL reply not reported")
	}
	// The connection is still usable after an error.
	if _, err := cl.statValues(ctx, 0, 1); err != nil {
		t.Errorf("after error: %v", err)
	}
}

// A dump error arrives in NLMSG_DONE, not NLMSG_ERROR.
func TestDumpErrorInDone(t *testing.T) {
	done := rdmanltest.ReadMessages(t, real("resp_stat_get_dump_nores_01.bin"))
	cl := &nldevClient{conn: nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		if reqs == nil {
			return nil, io.EOF
		}
		m := done[0]
		m.Header.Sequence = reqs[0].Header.Sequence
		return []netlink.Message{m}, nil
	})}
	if _, err := cl.qpSets(context.Background(), 0, 1); err == nil {
		t.Fatal("NLMSG_DONE with -EINVAL treated as success")
	}
}

func TestSynthOptionalStatus(t *testing.T) {
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1_optional_on.bin")}
	conn, _ := r.dial()
	cl := &nldevClient{conn: conn}
	st, err := cl.statStatus(context.Background(), 0, 1)
	if err != nil || len(st) != 38 {
		t.Fatalf("status: %d, %v", len(st), err)
	}
	var dyn, on []string
	for _, s := range st {
		if s.dynamic {
			dyn = append(dyn, s.name)
			if s.enabled {
				on = append(on, s.name)
			}
		}
	}
	if len(dyn) != 7 || fmt.Sprint(on) != "[cc_rx_ce_pkts]" {
		t.Errorf("optional = %v, enabled = %v", dyn, on)
	}
	sets, err := cl.qpSets(context.Background(), 0, 1)
	if err != nil || len(sets) != 1 || sets[0].qpType != "RC" || !sets[0].hasPID || sets[0].mode != counterModeAuto {
		t.Fatalf("qp sets = %+v, %v", sets, err)
	}
}

// A kernel with NETLINK_RDMA: the device list must come back without error.
func TestRealSocket(t *testing.T) {
	c, err := netlink.Dial(familyRDMA, nil)
	if err != nil {
		t.Skipf("NETLINK_RDMA not available: %v", err)
	}
	defer c.Close()
	cl := &nldevClient{conn: c}
	devs, err := cl.devices(context.Background())
	if err != nil {
		t.Skipf("RDMA netlink device list failed (no ib_core?): %v", err)
	}
	t.Logf("%d RDMA devices", len(devs))
	for _, d := range devs {
		if _, err := cl.statStatus(context.Background(), d.index, 1); err != nil {
			t.Logf("%s: status: %v", d.name, err)
		}
	}
}

func FuzzParseNetlinkAttrs(f *testing.F) {
	for _, dir := range []string{"testdata/nl-synth", "testdata/nl-real"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
		for _, file := range files {
			b, _ := os.ReadFile(file)
			if len(b) > 16 {
				f.Add(b[16:])
			}
		}
	}
	f.Add([]byte{4, 0})
	f.Add([]byte{0xff, 0xff, 0x50, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseStatReply(b)
		_, _ = parseDevice(b)
		_, _ = parseQPMode(b)
		_, _ = parseQPDumpMessage(b)
	})
}

// On a kernel the ACK of a doit request is a datagram of its own, after
// the reply: it is read with the reply, so the next request on the
// connection gets its own answer.
func TestDoitACKInItsOwnDatagram(t *testing.T) {
	reply := rdmanltest.ReadMessages(t, real("resp_stat_get_rxe0_p1_01.bin"))
	ack := rdmanltest.ReadMessages(t, real("resp_stat_get_rxe0_p1_02.bin"))
	var pending []netlink.Message // the ACK, delivered on the next read
	stamp := func(ms []netlink.Message, seq uint32) []netlink.Message {
		out := append([]netlink.Message(nil), ms...)
		for i := range out {
			out[i].Header.Sequence, out[i].Header.PID = seq, nltest.PID
		}
		return out
	}
	cl := &nldevClient{conn: nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		if reqs == nil {
			if pending == nil {
				return nil, io.EOF
			}
			out := pending
			pending = nil
			return out, nil
		}
		pending = stamp(ack, reqs[0].Header.Sequence)
		return stamp(reply, reqs[0].Header.Sequence), nil
	})}
	for i := range 3 {
		vals, err := cl.statValues(context.Background(), 0, 1)
		if err != nil || len(vals) != 15 {
			t.Fatalf("request %d: %d values, %v", i, len(vals), err)
		}
		if pending != nil {
			t.Fatalf("request %d: the ACK was left on the socket", i)
		}
	}
}

// A dump that exceeds the budget is drained: the next request on the same
// connection gets its own reply, not the rest of the dump.
func TestOverflowLeavesConnectionClean(t *testing.T) {
	_, dk := qpKeys()
	one := qpDumpReply(qpEntry(2, false, map[string]uint64{"rx_write_requests": 1}))
	var many []netlink.Message
	for range qpDumpMaxMsgs + 10 {
		many = append(many, one[0])
	}
	many = append(many, one[1])
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1.bin"), override: map[string][]netlink.Message{dk: many}}
	conn, _ := r.dial()
	cl := &nldevClient{conn: conn}
	if _, err := cl.qpSets(context.Background(), 0, 1); !errors.Is(err, errDumpOverflow) {
		t.Fatalf("err = %v, want overflow", err)
	}
	vals, err := cl.statValues(context.Background(), 0, 1)
	if err != nil || len(vals) == 0 {
		t.Fatalf("after overflow: %d values, %v", len(vals), err)
	}
}

// TestDumpInterrupted: a dump the kernel flags NLM_F_DUMP_INTR is never
// taken as complete. It runs again, up to dumpAttempts times, and then
// fails with errDumpInterrupted; both the device list (Execute) and the
// budgeted QP dump (ReceiveIter) do this.
func TestDumpInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupted int // dump runs answered with NLM_F_DUMP_INTR before clean ones
		wantErr     bool
	}{
		{"interrupted twice, then clean", dumpAttempts - 1, false},
		{"interrupted every time", dumpAttempts, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1.bin")}
			runs := map[int]int{} // dump runs by op
			conn := nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
				out, err := r.fn(reqs)
				if reqs == nil || err != nil || reqs[0].Header.Flags&netlink.Dump == 0 {
					return out, err
				}
				op := int(reqs[0].Header.Type) & 0x3ff
				runs[op]++
				if runs[op] <= tc.interrupted {
					for i := range out {
						out[i].Header.Flags |= netlink.DumpInterrupted
					}
				}
				return out, err
			})
			cl := &nldevClient{conn: conn}
			devs, err := cl.devices(context.Background())
			if tc.wantErr != errors.Is(err, errDumpInterrupted) || !tc.wantErr && len(devs) == 0 {
				t.Errorf("devices: %d, %v (want interrupted error: %v)", len(devs), err, tc.wantErr)
			}
			sets, err := cl.qpSets(context.Background(), 0, 1)
			if tc.wantErr != errors.Is(err, errDumpInterrupted) || !tc.wantErr && len(sets) == 0 {
				t.Errorf("qp sets: %d, %v (want interrupted error: %v)", len(sets), err, tc.wantErr)
			}
			for op, n := range runs {
				if want := min(tc.interrupted+1, dumpAttempts); n != want {
					t.Errorf("op %d dumped %d times, want %d", op, n, want)
				}
			}
		})
	}
}

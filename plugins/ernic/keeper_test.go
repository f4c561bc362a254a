package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// renderStats writes a statistics file as the server does, for the n-th
// write: every counter grows with n (and gains digits, so lines move), two
// QPs, and the LIF block when lif is set.
func renderStats(n uint64, lif bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nInstance:\n  socket      : /run/rocm-ernic/7.sock\n  mac         : 02:00:00:00:00:07\n  connection  : connected\n\n", statsTitle)
	fmt.Fprintf(&b, "Write count : %d\n\nDevice Statistics:\n", n)
	for i, k := range append(deviceKeys, "reset_count", "total_ip_bytes_tx", "total_ip_bytes_rx") {
		fmt.Fprintf(&b, "  %-23s : %d\n", k, n*uint64(i+1)*977)
	}
	b.WriteString("\nPer-QP Statistics:\n")
	for _, h := range []string{"17", "18"} {
		fmt.Fprintf(&b, "  QP %s:\n", h)
		for i, c := range qpCounters {
			fmt.Fprintf(&b, "    %s : %d\n", c.key, n*uint64(i+3)*131)
		}
		fmt.Fprintf(&b, "    WQEs by opcode:\n      %-21s : %d\n\n", "SEND", n)
	}
	if lif {
		b.WriteString("LIF Statistics:\n")
		for i, name := range []string{"rx_ucast_bytes", "tx_ucast_bytes", "rx_rdma_ecn_packets"} {
			fmt.Fprintf(&b, "  %-35s : %d\n", name, n*uint64(i+1)*4099)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// TestKeeperRefusesEveryPrefix: after a complete file, no prefix of the
// next write (what a read during the rewrite sees) replaces it.
func TestKeeperRefusesEveryPrefix(t *testing.T) {
	for id, data := range fixtureStats(t) {
		k := newKeeper()
		inc := incarnation{pid: 2101, startTick: 5}
		full := parseStats(data)
		if got, _ := k.accept(id, inc, full, full.complete); got != full {
			t.Fatalf("%s: the complete file was not accepted", id)
		}
		for i := range len(data) {
			s := parseStats(data[:i])
			if got, _ := k.accept(id, inc, s, s.complete); got != full {
				t.Fatalf("%s: the first %d bytes replaced the complete file", id, i)
			}
		}
		if _, torn := k.accept(id, inc, full, true); torn != float64(len(data)) {
			t.Errorf("%s: %v torn reads counted, want %d", id, torn, len(data))
		}
	}
}

func TestKeeperResets(t *testing.T) {
	k := newKeeper()
	server := incarnation{pid: 100, startTick: 1000}
	high, low := parseStats(renderStats(5000, true)), parseStats(renderStats(3, true))
	k.accept("1", server, high, true)

	// The same process lowering its counters is a torn read until it has
	// done so resetConfirmations times in a row, consistently.
	for i := 1; i < resetConfirmations; i++ {
		if got, torn := k.accept("1", server, low, true); got != high || torn != float64(i) {
			t.Fatalf("read %d: accepted the lower file (torn %v)", i, torn)
		}
	}
	if got, _ := k.accept("1", server, low, true); got != low {
		t.Fatal("a consistent reset of the same process was never believed")
	}

	// A restarted server (another pid, or the same pid with another start
	// time) starts from zero at once: a real reset.
	k.accept("1", server, high, true)
	for _, next := range []incarnation{{pid: 101, startTick: 2000}, {pid: 101, startTick: 3000}} {
		if got, _ := k.accept("1", next, low, true); got != low {
			t.Errorf("restart as %+v: lower values not exported", next)
		}
		k.accept("1", next, high, true)
	}

	// An untrusted first read of a new server exports nothing, rather than
	// the old server's values or the new one's half-written zeros.
	if got, _ := k.accept("1", incarnation{pid: 102}, parseStats(nil), false); got != nil {
		t.Error("the old server's values survived a restart")
	}

	// Losing the LIF block is a cut, not a new layout.
	k = newKeeper()
	k.accept("2", server, high, true)
	if got, _ := k.accept("2", server, parseStats(renderStats(5001, false)), true); got != high {
		t.Error("a file without the LIF block replaced one with it")
	}
}

func TestServerWatch(t *testing.T) {
	sw := newServerWatch()
	epoch := func(tick uint64) (float64, bool) { return 1e9 + float64(tick)/userHZ, true }
	mtime := time.Unix(1e9+100, 0) // the file was last written 100 s after boot
	alive := func(tick uint64) process { return process{state: procAlive, startTick: tick} }

	if p, inc := sw.check("1", 42, alive(50*userHZ), mtime, epoch); p.state != procAlive || inc.startTick != 50*userHZ {
		t.Fatalf("the server: %+v %+v", p, inc)
	}
	// The same pid with another start time is another process.
	if p, inc := sw.check("1", 42, alive(70*userHZ), mtime, epoch); p.state != procGone || inc.startTick != 50*userHZ {
		t.Errorf("reused pid: %+v, statistics of %+v", p, inc)
	}
	// A new pid in the manifest is a new server.
	if p, _ := sw.check("1", 43, alive(90*userHZ), mtime, epoch); p.state != procAlive {
		t.Errorf("new pid: %+v", p)
	}
	// A process that started long after the file's last write is not the
	// server; one within the grace is.
	late := uint64((100 + reuseGrace.Seconds() + 1) * userHZ)
	if p, _ := sw.check("2", 44, alive(late), mtime, epoch); p.state != procGone {
		t.Errorf("a process newer than the statistics file: %+v", p)
	}
	if p, _ := sw.check("3", 45, alive(late-2*userHZ), mtime, epoch); p.state != procAlive {
		t.Errorf("a server within the grace: %+v", p)
	}
	// Without a statistics file, or without the start time, nothing to compare.
	if p, _ := sw.check("4", 46, alive(late), time.Time{}, epoch); p.state != procAlive {
		t.Errorf("no statistics file: %+v", p)
	}
	if p, _ := sw.check("5", 47, process{state: procAlive}, mtime, epoch); p.state != procAlive {
		t.Errorf("no start time: %+v", p)
	}
}

// writeInPlace rewrites path without an atomic rename, the way the server
// does, in small pieces with pauses between them so that readers see
// partial files. Odd rounds truncate first (fopen "w"); even rounds
// overwrite from the start and truncate after (so a reader can see the
// start of the new text followed by the end of the old one).
func writeInPlace(path string, data []byte, round int, rng *rand.Rand) error {
	flags := os.O_WRONLY | os.O_CREATE
	if round%2 == 1 {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(700))
		if _, err := f.Write(rest[:n]); err != nil {
			f.Close()
			return err
		}
		rest = rest[n:]
		if rng.IntN(3) == 0 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestConcurrentWriter: while a goroutine rewrites the statistics files in
// place, repeated collects never show a counter going backwards, and they
// still follow the writer.
func TestConcurrentWriter(t *testing.T) {
	root := t.TempDir()
	runDir := filepath.Join(root, "run", "rocm-ernic")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := []string{"7", "8"}
	manifest := `{"instances": [{"id": 7, "role": "manager", "pid": 0, "mac": "02:00:00:00:00:07", "vm": null},
	  {"id": 8, "role": "worker", "pid": 0, "mac": "02:00:00:00:00:08", "vm": null}]}`
	if err := os.WriteFile(filepath.Join(runDir, manifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	const first = 95 // values gain a digit during the run
	for _, id := range ids {
		if err := os.WriteFile(filepath.Join(runDir, id+".stats"), renderStats(first, id == "7"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes atomic.Int64
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for n := uint64(first + 1); ctx.Err() == nil; n++ {
				if err := writeInPlace(filepath.Join(runDir, id+".stats"), renderStats(n, id == "7"), int(n), rng); err != nil {
					t.Error(err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	p := newPlugin()
	c := sdktest.Client(t, p, sdktest.Options{Rootfs: root, Procfs: filepath.Join(root, "proc")})
	last := map[string]float64{}
	var torn float64
	// At least 3 s and 50 collects of racing, and on until a collect has
	// seen the writer's progress (a loaded machine may starve the writer
	// for a while); 60 s more at most.
	const writeCount = `ernic_stats_writes_total{ernic_id="7",role="manager"}`
	deadline := time.Now().Add(3 * time.Second)
	giveUp := deadline.Add(60 * time.Second)
	collects := 0
	for ; time.Now().Before(deadline) || collects < 50 || (last[writeCount] <= first && time.Now().Before(giveUp)); collects++ {
		res := sdktest.Collect(t, c, 0)
		if res.Status != nil || len(res.Errors) != 0 {
			t.Fatalf("collect %d: status %v, errors %v", collects, res.Status, res.Errors)
		}
		torn = 0
		for _, mf := range res.Families(t) {
			if mf.GetName() == "ernic_stats_torn_reads_total" {
				for _, m := range mf.GetMetric() {
					torn += m.GetCounter().GetValue()
				}
			}
			for _, m := range mf.GetMetric() {
				if m.Counter == nil {
					continue
				}
				key := sampleKey(mf.GetName(), m.GetLabel())
				v := m.GetCounter().GetValue()
				if prev, ok := last[key]; ok && v < prev {
					t.Errorf("collect %d: %s went from %v to %v", collects, key, prev, v)
				}
				last[key] = v
			}
		}
	}
	cancel()
	wg.Wait()
	got := last[writeCount]
	if got <= first {
		t.Errorf("after %d writes the write count is still %v: the collects did not follow the writer", writes.Load(), got)
	}
	t.Logf("%d collects, %d writes, %v torn reads refused, last write count seen %v", collects, writes.Load(), torn, got)
}

// TestKeeperBlendedReads: a complete, stable read that spans a rewrite of
// the same length blends two values at the seam, possibly above both. The
// accepted value then holds until the real one passes it: no counter goes
// backwards, a blended write count is not mistaken for restarted
// statistics, and a QP whose counters all dropped is a new QP.
func TestKeeperBlendedReads(t *testing.T) {
	k := newKeeper()
	inc := incarnation{pid: 9}
	blend := func(n uint64, key, v string) *stats {
		s := parseStats(renderStats(n, true))
		s.values[key] = parseValue(v)
		return s
	}
	k.accept("1", inc, parseStats(renderStats(995, true)), true)
	// reset_count of write 996 is 12650196, of 995 12637495; the seam
	// gives 12657495.
	k.accept("1", inc, blend(996, "reset_count", "12657495"), true)
	got, torn := k.accept("1", inc, parseStats(renderStats(996, true)), true)
	if v := got.get("reset_count").counter(); v != 12657495 || torn != 1 {
		t.Errorf("reset_count %v (torn %v), want the blended 12657495 held", v, torn)
	}
	if v := got.get("commands").counter(); v != 996*977 {
		t.Errorf("commands %v: the other counters must move on", v)
	}
	got, _ = k.accept("1", inc, parseStats(renderStats(997, true)), true)
	if v := got.get("reset_count").counter(); v != 997*13*977 {
		t.Errorf("reset_count %v after the real value passed the blend", v)
	}

	// A blended write count, then real reads with a lower one but growing
	// counters: held, not a restart.
	k.accept("1", inc, blend(998, keyWriteCount, "1998"), true)
	for n := uint64(999); n < 999+resetConfirmations+1; n++ {
		got, _ = k.accept("1", inc, parseStats(renderStats(n, true)), true)
		if wc := got.get(keyWriteCount).counter(); wc != 1998 {
			t.Fatalf("write %d: write count %v, want 1998 held", n, wc)
		}
		if v := got.get("commands").counter(); v != float64(n*977) {
			t.Fatalf("write %d: commands %v", n, v)
		}
	}

	// A QP whose counters all dropped is a new QP under an old handle.
	renewedQP := parseStats(renderStats(2000, true))
	for _, c := range qpCounters {
		renewedQP.qp("17").values[c.key] = parseValue("1")
	}
	got, _ = k.accept("1", inc, renewedQP, true)
	if v := got.qp("17").values["bytes_sent"].counter(); v != 1 {
		t.Errorf("renewed QP 17: bytes_sent %v, want 1", v)
	}
	if v := got.qp("18").values["bytes_sent"].counter(); v != 2000*3*131 {
		t.Errorf("QP 18: bytes_sent %v", v)
	}
}

package main

import (
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// kernelHasSunrpc tells whether this kernel has the NFS client's RPC
// layer loaded: its tracepoints in tracefs or its module's BTF.
func kernelHasSunrpc() bool {
	for _, p := range []string{"/sys/kernel/tracing/events/sunrpc", "/sys/kernel/btf/sunrpc"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// procWithMounts returns a procfs root whose self/mounts is the file.
func procWithMounts(t *testing.T, mountsFile string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(mountsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "self", "mounts"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestNFSLatencyLoadsWhereTheKernelHasSunrpc: with nfs_latency: true the
// group loads where the kernel has an NFS client. Where it has none (this
// development machine's kernel is built without sunrpc), all modes fail
// with a counted nfs_latency error that says what is missing, and the disk
// programs still run.
func TestNFSLatencyLoadsWhereTheKernelHasSunrpc(t *testing.T) {
	requireRoot(t)
	_, c := start(t, map[string]any{"nfs_latency": true, "tcp_retransmits": false})
	s := collect(t, c)
	tpbtf := s.get(t, `ebpf_program_loaded{attach="tp_btf",program="rpc_stats_latency"}`)
	if kernelHasSunrpc() {
		if tpbtf != 1 {
			t.Fatalf("the kernel has sunrpc but rpc_stats_latency does not run in tp_btf mode:\n%s\n%s", s.errorText(), s.text)
		}
		return
	}
	t.Log("this kernel has no sunrpc: checking that the group fails alone and says why")
	if tpbtf != 0 || s.get(t, `ebpf_program_loaded{attach="raw_tp",program="rpc_stats_latency"}`) != 0 || s.get(t, `ebpf_program_loaded{attach="tracepoint",program="rpc_stats_latency"}`) != 0 {
		t.Fatalf("rpc_stats_latency reported running on a kernel without sunrpc:\n%s", s.text)
	}
	if got := s.get(t, `ebpf_collection_errors_total{collector="nfs_latency"}`); got != 1 {
		t.Errorf("nfs_latency errors = %v, want 1", got)
	}
	if msg := s.errorText(); !strings.Contains(msg, "nfs_latency: ") || !strings.Contains(msg, "sunrpc") {
		t.Errorf("error does not name the group and sunrpc:\n%s", msg)
	}
	if got := s.get(t, `ebpf_program_loaded{attach="tp_btf",program="block_rq_issue"}`); got != 1 {
		t.Errorf("the disk programs stopped running: block_rq_issue tp_btf = %v", got)
	}
}

// TestNFSLatencyDefaultWaitsForAMount: by default the group is not tried
// while nothing is mounted over NFS (no error, no program states: a
// healthy node without NFS), and is tried when an NFS mount appears. On a
// kernel without sunrpc (this development machine) a mount table that
// lists NFS cannot be this kernel's: nothing is loaded and nothing
// counted as an error.
func TestNFSLatencyDefaultWaitsForAMount(t *testing.T) {
	requireRoot(t)
	p, c := startIn(t, map[string]any{"tcp_retransmits": false, "disk": false}, procWithMounts(t, "testdata/mounts-no-nfs"))
	s := collect(t, c)
	if _, ok := s.samples[`ebpf_program_loaded{attach="tp_btf",program="rpc_stats_latency"}`]; ok {
		t.Fatalf("rpc_stats_latency tried without an NFS mount:\n%s", s.text)
	}
	if got := s.get(t, `ebpf_collection_errors_total{collector="nfs_latency"}`); got != 0 {
		t.Fatalf("nfs_latency errors = %v without an NFS mount: %s", got, s.errorText())
	}

	data, err := os.ReadFile("testdata/mounts-nfs-volumes")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.mounts, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.refreshNFSLatency()
	p.mu.Unlock()
	s = collect(t, c)
	loaded, tried := s.samples[`ebpf_program_loaded{attach="tp_btf",program="rpc_stats_latency"}`]
	if kernelHasSunrpc() {
		if loaded != 1 {
			t.Fatalf("not loaded after an NFS mount appeared:\n%s", s.errorText())
		}
		return
	}
	if tried {
		t.Errorf("programs tried on a kernel without sunrpc:\n%s", s.text)
	}
	if got := s.get(t, `ebpf_collection_errors_total{collector="nfs_latency"}`); got != 0 {
		t.Errorf("nfs_latency errors = %v on a kernel without sunrpc: %s", got, s.errorText())
	}
}

// TestNFSLatencyAggregation feeds the exporter's side synthetic events:
// nfs_stats entries as the programs write them (both key forms), in a real
// BPF map, read through the real Collect path. It is the check this
// kernel allows (no sunrpc here); the lab's NFS server is where the
// programs' own counts belong.
func TestNFSLatencyAggregation(t *testing.T) {
	requireRoot(t)
	p, c := startIn(t, map[string]any{"tcp_retransmits": false, "disk": false, "nfs_latency": false}, procWithMounts(t, "testdata/mounts-nfs-volumes"))
	spec, err := nfsSpec(defaultNFSBounds())
	if err != nil {
		t.Fatal(err)
	}
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{}}
	for _, name := range []string{"nfs_stats", "nfs_counters"} {
		m, err := ebpf.NewMap(spec.Maps[name])
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		coll.Maps[name] = m
	}
	p.mu.Lock()
	p.cfg.NFSLatency = nil // auto: map volumes, the probe is already "running"
	p.nfs.probe = &probe{attach: attachTPBTF, coll: coll}
	p.nfs.totals = newNFSTotals()
	p.refreshNFSLatency()
	p.mu.Unlock()

	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	bounds := boundsNanoseconds(defaultNFSBounds())
	// put adds n calls of latency ns (each) on CPU cpu.
	put := func(k nfsNfsKey, cpu int, n, retrans, latency uint64) {
		t.Helper()
		values := make([]nfsNfsStats, cpus)
		_ = coll.Maps["nfs_stats"].Lookup(k, &values)
		v := &values[cpu]
		v.Requests += n
		v.Retransmits += retrans
		v.LatencyNs += n * latency
		i := 0
		for i < len(defaultNFSBounds()) && latency > bounds[i] {
			i++
		}
		v.Buckets[i] += n
		if err := coll.Maps["nfs_stats"].Put(k, values); err != nil {
			t.Fatal(err)
		}
	}
	key := func(proc string, vers uint32, addr string, text bool) nfsNfsKey {
		var k nfsNfsKey
		for i := range len(proc) {
			k.Proc[i] = int8(proc[i])
		}
		k.Vers = vers
		if text {
			k.AddrText = 1
			copy(k.Addr[:], addr)
		} else {
			a := netip.MustParseAddr(addr).As16()
			copy(k.Addr[:], a[:])
		}
		return k
	}
	read5 := key("READ", 4, "::ffff:10.20.0.5", false)
	write5 := key("WRITE", 4, "10.20.0.5", true) // the classic event's text form
	getattr7v3 := key("GETATTR", 3, "10.20.0.7", false)
	read7v4 := key("READ", 4, "10.20.0.7", false)
	put(read5, 0, 3, 1, 700_000)         // 0.7 ms: le 0.0009765625
	put(read5, cpus-1, 1, 0, 20_000_000) // 20 ms: le 0.03125
	put(write5, 0, 2, 0, 100_000_000)    // 100 ms: above every bound
	put(getattr7v3, 0, 5, 0, 300_000)    // 0.3 ms: le 0.00048828125
	put(read7v4, 0, 1, 0, 1_000_000)     // 1 ms: le 0.001953125

	s := collect(t, c)
	if len(s.errors) != 0 {
		t.Fatalf("collect errors:\n%s", s.errorText())
	}
	lab := func(proto, op, vol, server string) string {
		return `protocol="` + proto + `",operation="` + op + `",volume_id="` + vol + `",server="` + server + `"`
	}
	want := map[string]float64{
		`nfs_op_requests_total{` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`:                           4,
		`nfs_op_rpc_retransmits_total{` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`:                    1,
		`nfs_op_latency_seconds_count{` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`:                    4,
		`nfs_op_latency_seconds_sum{` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`:                      0.0221,
		`nfs_op_latency_seconds_bucket{le="0.0009765625",` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`: 3,
		`nfs_op_latency_seconds_bucket{le="0.015625",` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`:     3,
		`nfs_op_latency_seconds_bucket{le="0.03125",` + lab("nfs4", "read", "datasets", "10.20.0.5") + `}`:      4,
		`nfs_op_latency_seconds_bucket{le="0.0625",` + lab("nfs4", "write", "datasets", "10.20.0.5") + `}`:      0,
		`nfs_op_latency_seconds_count{` + lab("nfs4", "write", "datasets", "10.20.0.5") + `}`:                   2,
		// Two v3 exports of 10.20.0.7 are mounted: no volume is guessed.
		`nfs_op_requests_total{` + lab("nfs3", "getattr", "", "10.20.0.7") + `}`:                            5,
		`nfs_op_latency_seconds_bucket{le="0.00048828125",` + lab("nfs3", "getattr", "", "10.20.0.7") + `}`: 5,
		// Its one v4 export is.
		`nfs_op_requests_total{` + lab("nfs4", "read", "models", "10.20.0.7") + `}`: 1,
		`ebpf_events_dropped_total{reason="nfs_stats_full"}`:                        0,
	}
	for k, v := range want {
		k = normalizeKey(k)
		if got := s.get(t, k); !closeTo(got, v) {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}

	// A second v4 export of 10.20.0.5 is mounted: later reads of that
	// server and version go to volume_id "", the datasets series keeps
	// what it counted.
	extra := "10.20.0.5:/vol/models /mnt/m5 nfs4 rw,vers=4.2,proto=tcp,addr=10.20.0.5 0 0\n"
	f, err := os.OpenFile(p.mounts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(extra)
	f.Close()
	p.mu.Lock()
	p.refreshNFSLatency()
	p.mu.Unlock()
	put(read5, 1%cpus, 2, 0, 700_000)
	s = collect(t, c)
	if got := s.get(t, normalizeKey(`nfs_op_requests_total{`+lab("nfs4", "read", "datasets", "10.20.0.5")+`}`)); got != 4 {
		t.Errorf("datasets reads = %v after the second mount, want 4 (unchanged)", got)
	}
	if got := s.get(t, normalizeKey(`nfs_op_requests_total{`+lab("nfs4", "read", "", "10.20.0.5")+`}`)); got != 2 {
		t.Errorf("ambiguous reads = %v, want the 2 issued after the second mount", got)
	}
}

// normalizeKey sorts a key's labels as seriesKeyOf does.
func normalizeKey(k string) string {
	name, rest, _ := strings.Cut(k, "{")
	rest = strings.TrimSuffix(rest, "}")
	var parts []string
	for _, p := range splitLabels(rest) {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// splitLabels splits `a="x",b="y,z"` at the commas between labels.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
		case r == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

package main

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestConfigRefusals(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"attach": "kprobe"}, Key: "attach", Detail: "not one of"},
		{Raw: map[string]any{"group_attach": map[string]any{"nfs": "tp_btf"}}, Key: "group_attach", Detail: "not a program group"},
		{Raw: map[string]any{"group_attach": map[string]any{"disk": "kprobe"}}, Key: "group_attach.disk", Detail: "not one of auto, tp_btf, tracepoint"},
		{Raw: map[string]any{"group_attach": map[string]any{"object_store_connections": "raw_tp"}}, Key: "group_attach.object_store_connections", Detail: "not one of auto, tp_btf, tracepoint, fentry, kprobe"},
		{Raw: map[string]any{"group_attach": map[string]any{"nfs_latency": "Kprobe"}}, Key: "group_attach.nfs_latency", Detail: "not one of auto, tp_btf, raw_tp, tracepoint"},
		{Raw: map[string]any{"disk_latency_buckets": []any{0.001, 0.001}}, Key: "disk_latency_buckets[1]", Detail: "strictly increasing"},
		{Raw: map[string]any{"disk_latency_buckets": []any{0.01, 0.001}}, Key: "disk_latency_buckets[1]", Detail: "not above the previous bound"},
		{Raw: map[string]any{"disk_latency_buckets": []any{0.0, 0.001}}, Key: "disk_latency_buckets[0]", Detail: "not positive"},
		{Raw: map[string]any{"disk_latency_buckets": []any{-1.0}}, Key: "disk_latency_buckets[0]", Detail: "not positive"},
		{Raw: map[string]any{"disk_latency_buckets": []any{}}, Key: "disk_latency_buckets", Detail: "empty"},
		{Raw: map[string]any{"disk_latency_buckets": []any{1e-10}}, Key: "disk_latency_buckets[0]", Detail: "nanosecond"},
		{Raw: map[string]any{"disk_latency_buckets": []any{1.2e-9, 1.7e-9}}, Key: "disk_latency_buckets[1]", Detail: "same nanosecond"},
		{Raw: map[string]any{"disk_latency_buckets": manyBounds(maxBounds + 1)}, Key: "disk_latency_buckets", Detail: "at most 32"},
		{Raw: map[string]any{"nfs_servers": []any{"nfs.example"}}, Key: "nfs_servers[0]", Detail: "not an IP address"},
		{Raw: map[string]any{"nfs_latency_buckets": []any{0.05, 0.0005}}, Key: "nfs_latency_buckets[1]", Detail: "not above the previous bound"},
		{Raw: map[string]any{"nfs_volume_id_regex": "(["}, Key: "nfs_volume_id_regex", Detail: "missing closing ]"},
		{Raw: map[string]any{"tcp_rtt_buckets": []any{-0.001}}, Key: "tcp_rtt_buckets[0]", Detail: "not positive"},
		{Raw: map[string]any{"nfs_ports": []any{0.0}}, Key: "nfs_ports[0]", Detail: "not a port"},
		{Raw: map[string]any{"object_store_ports": []any{70000.0}}, Key: "object_store_ports", Detail: ": got "},
		{Raw: map[string]any{"object_store_endpoints": []any{"bad name!"}}, Key: "object_store_endpoints[0]", Detail: "neither an IP address nor a host name"},
		{Raw: map[string]any{"refresh_interval": "100ms"}, Key: "refresh_interval", Detail: "below the minimum"},
		{Raw: map[string]any{"max_destinations": 0.0}, Key: "max_destinations", Detail: "not between"},
		{Raw: map[string]any{"no_such_key": true}, Key: "no_such_key", Detail: "unknown key"},
	})
}

func manyBounds(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = float64(i+1) / 1000
	}
	return out
}

// TestConfigAccepts checks the documented keys without loading programs
// (both groups off).
func TestConfigAccepts(t *testing.T) {
	p := newPlugin()
	err := sdktest.Configure(t, p, map[string]any{
		"attach": "tp_btf", "disk": false, "tcp_retransmits": false,
		"disk_latency_buckets": []any{0.0005, 0.001, 0.005, 0.05},
		"tracefs_path":         "/sys/kernel/tracing",
		"nfs_servers":          []any{"10.0.0.1", "fd00::1"}, "nfs_ports": []any{2049.0},
		"object_store_endpoints": []any{"s3.example.com", "10.0.0.2"}, "object_store_ports": []any{443.0},
		"refresh_interval": "30s", "max_destinations": 64.0,
	}, sdk.Paths{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !slices.Equal(p.cfg.bounds, []float64{0.0005, 0.001, 0.005, 0.05}) {
		t.Errorf("bounds %v", p.cfg.bounds)
	}
}

func TestDefaultBoundsAreSchema0(t *testing.T) {
	b := defaultBounds()
	if err := validateBounds("default", b); err != nil {
		t.Fatal(err)
	}
	if len(b) > maxBounds {
		t.Fatalf("%d default bounds, the programs hold %d", len(b), maxBounds)
	}
	for i, v := range b {
		// Native histogram schema 0: bucket index k has upper bound 2^k.
		if v != math.Pow(2, float64(minDefaultExp+i)) {
			t.Errorf("bound %d = %v, want 2^%d", i, v, minDefaultExp+i)
		}
	}
	ns := boundsNanoseconds(b)
	if ns[0] != 953 || ns[len(b)-1] != 16e9 {
		t.Errorf("nanosecond thresholds %d … %d, want 953 … 16000000000", ns[0], ns[len(b)-1])
	}
}

func TestParseNFSServers(t *testing.T) {
	in := strings.Join([]string{
		"srv:/a /mnt/a nfs4 rw,vers=4.2,addr=10.0.0.5,clientaddr=10.0.0.9 0 0",
		"srv:/b /mnt/b nfs4 rw,vers=4.2,addr=10.0.0.5 0 0", // same server, once
		"[fd00::2]:/c /mnt/c nfs rw,vers=3,addr=fd00::2 0 0",
		"tmpfs /tmp tmpfs rw,addr=10.9.9.9 0 0", // not NFS
		"srv:/d /mnt/d nfs4 rw,addr=bogus 0 0",  // unparsable address: skipped
		"short line",
	}, "\n")
	got, err := parseNFSServers(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, a := range got {
		s = append(s, a.String())
	}
	if want := []string{"10.0.0.5", "fd00::2"}; !slices.Equal(s, want) {
		t.Errorf("servers %v, want %v", s, want)
	}
}

func FuzzParseNFSServers(f *testing.F) {
	f.Add("srv:/a /mnt nfs4 rw,addr=10.0.0.5 0 0\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseNFSServers(strings.NewReader(in))
		if err == nil && !slices.IsSortedFunc(got, func(a, b netip.Addr) int { return a.Compare(b) }) {
			t.Errorf("unsorted: %v", got)
		}
	})
}

func TestRetransmitTotalsSurviveEviction(t *testing.T) {
	r := newRetransmitTotals()
	a := destination{port: 2049, class: classNFS}
	name := func(destination) []string { return []string{"srv"} }
	r.update(map[destination]uint64{a: 3}, name)
	r.update(map[destination]uint64{}, name)     // evicted
	r.update(map[destination]uint64{a: 2}, name) // inserted again
	r.update(map[destination]uint64{a: 2}, name) // unchanged
	if got := r.totals[seriesKey{classNFS, "srv"}]; got != 5 {
		t.Errorf("total %d, want 5 (3 before the eviction, 2 after)", got)
	}
}

func TestNFSServersFromMountsFixture(t *testing.T) {
	got, err := nfsServers("testdata/mounts-nfs")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].String() != "10.20.0.5" || got[1].String() != "10.20.0.7" {
		t.Errorf("servers %v, want 10.20.0.5 and 10.20.0.7", got)
	}
}

// TestAttachOrder: auto tries every mode a group has in the order
// (tracepoints, then fentry, then kprobes); attach and group_attach narrow
// it to one mode, group_attach winning for its group.
func TestAttachOrder(t *testing.T) {
	modes := func(vs []variant) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.attach)
		}
		return out
	}
	for _, tc := range []struct {
		attach string
		groups map[string]string
		group  string
		want   []string
	}{
		{"auto", nil, "object_store_connections", []string{attachTPBTF, attachTracepoint, attachFentry, attachKprobe}},
		{"auto", nil, "disk", []string{attachTPBTF, attachTracepoint}},
		{"auto", nil, collectorNFSLatency, []string{attachTPBTF, attachRawTP, attachTracepoint}},
		{"tracepoint", nil, "object_store_connections", []string{attachTracepoint}},
		{"tracepoint", map[string]string{"object_store_connections": "kprobe"}, "object_store_connections", []string{attachKprobe}},
		{"tracepoint", map[string]string{"object_store_connections": "kprobe"}, "disk", []string{attachTracepoint}},
		{"tp_btf", map[string]string{"object_store_connections": "auto"}, "object_store_connections", []string{attachTPBTF}},
		{"auto", map[string]string{collectorNFSLatency: "raw_tp"}, collectorNFSLatency, []string{attachRawTP}},
	} {
		c := defaultConfig()
		c.Attach, c.GroupAttach = tc.attach, tc.groups
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
		if got := modes(c.attachVariants(tc.group)); !slices.Equal(got, tc.want) {
			t.Errorf("attach %s, group_attach %v: %s tries %v, want %v", tc.attach, tc.groups, tc.group, got, tc.want)
		}
	}
}

// TestFallbackOrder injects load failures: each failed mode is a log line
// naming it and its error, the next is tried, the first that loads runs
// and none after it is tried; every mode's programs have a state, 1 only
// for the running one's (a kprobe and its kretprobe are one program).
func TestFallbackOrder(t *testing.T) {
	c := defaultConfig()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	variants := c.attachVariants("object_store_connections")
	for _, tc := range []struct {
		fail    []string // modes whose load fails
		running string   // "" when none runs
	}{
		{nil, attachTPBTF},
		{[]string{attachTPBTF, attachTracepoint}, attachFentry},
		{[]string{attachTPBTF, attachTracepoint, attachFentry}, attachKprobe},
		{[]string{attachTPBTF, attachTracepoint, attachFentry, attachKprobe}, ""},
	} {
		var tried, logged []string
		load := func(v variant) (*probe, error) {
			tried = append(tried, v.attach)
			if slices.Contains(tc.fail, v.attach) {
				return nil, errors.New("injected " + v.attach + " failure")
			}
			return &probe{attach: v.attach}, nil
		}
		logf := func(msg string, args ...any) { logged = append(logged, fmt.Sprint(append([]any{msg}, args...)...)) }
		p, states, err := tryVariants("object_store_connections", variants, load, logf)
		wantTried := append(slices.Clone(tc.fail), tc.running)
		if tc.running == "" {
			wantTried = tc.fail
		}
		if !slices.Equal(tried, wantTried) {
			t.Errorf("failing %v: tried %v, want %v", tc.fail, tried, wantTried)
		}
		if len(logged) != len(wantTried) {
			t.Errorf("failing %v: %d log lines, want %d: %q", tc.fail, len(logged), len(wantTried), logged)
		}
		for i, mode := range tc.fail {
			if i < len(logged) && (!strings.Contains(logged[i], "not running in this mode") || !strings.Contains(logged[i], "injected "+mode+" failure")) {
				t.Errorf("log line %q: want the %s failure and its error", logged[i], mode)
			}
		}
		if tc.running == "" {
			if p != nil || err == nil {
				t.Errorf("failing every mode: probe %v, error %v; want none and an error", p, err)
			} else {
				for _, mode := range tc.fail {
					if !strings.Contains(err.Error(), mode+": injected") {
						t.Errorf("error %q does not say why %s failed", err, mode)
					}
				}
			}
		} else if p == nil || p.attach != tc.running || err != nil {
			t.Errorf("failing %v: probe %v, error %v; want %s running", tc.fail, p, err, tc.running)
		}
		if len(states) != 12 { // 3 programs in each of 4 modes
			t.Errorf("failing %v: %d states, want 12: %+v", tc.fail, len(states), states)
		}
		for _, s := range states {
			if s.loaded != (s.attach == tc.running) {
				t.Errorf("failing %v: state %+v", tc.fail, s)
			}
		}
	}
}

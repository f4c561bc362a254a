package main

import (
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
		{Raw: map[string]any{"object_store_ports": []any{70000.0}}, Key: "object_store_ports", Detail: "cannot unmarshal"},
		{Raw: map[string]any{"object_store_endpoints": []any{"bad name!"}}, Key: "object_store_endpoints[0]", Detail: "neither an IP address nor a host name"},
		{Raw: map[string]any{"refresh_interval": "100ms"}, Key: "refresh_interval", Detail: "below the minimum"},
		{Raw: map[string]any{"max_destinations": 0.0}, Key: "max_destinations", Detail: "not between"},
		{Raw: map[string]any{"no_such_key": true}, Key: "no_such_key", Detail: "unknown field"},
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

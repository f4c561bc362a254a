package metricfilter

import (
	"slices"
	"testing"
)

func TestAllow(t *testing.T) {
	cases := []struct {
		name        string
		allow, deny []string
		in          map[string]bool
	}{
		{"unset allows everything", nil, nil, map[string]bool{"a": true, "rdma_x_total": true}},
		{"glob on base name selects counter", []string{"rdma_port_*"}, nil, map[string]bool{
			"rdma_port_rcv_data_total": true, "rdma_port_info": true, "rdma_lifespan_milliseconds": false}},
		{"exact base name selects the _total family", []string{"nfs_rpc_count"}, nil, map[string]bool{
			"nfs_rpc_count_total": true, "nfs_rpc_count_foo": false}},
		{"full counter name works too", []string{"nfs_rpc_count_total"}, nil, map[string]bool{"nfs_rpc_count_total": true}},
		{"comma list in one token and blanks", []string{" ernic_* , nfs_rpc_*,,"}, nil, map[string]bool{
			"ernic_qp": true, "nfs_rpc_rtt_seconds_total": true, "nvme_info": false}},
		{"deny after allow", []string{"rdma_*"}, []string{"rdma_qp_*"}, map[string]bool{
			"rdma_port_info": true, "rdma_qp_rx_bytes_total": false}},
		{"deny alone", nil, []string{"go_*"}, map[string]bool{"go_goroutines": false, "rdma_port_info": true}},
		{"histogram selected by family name", []string{"disk_read_latency_seconds"}, nil, map[string]bool{
			"disk_read_latency_seconds": true, "disk_read_latency_seconds_bucket": false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := New(c.allow, c.deny)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range c.in {
				if got := f.Allow(name); got != want {
					t.Errorf("Allow(%q) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestBadPattern(t *testing.T) {
	if _, err := New([]string{"rdma_[x"}, nil); err == nil {
		t.Fatal("want error for unterminated class")
	}
}

func TestUnmatched(t *testing.T) {
	f, _ := New([]string{"rdma_*", "nfs_typo_*"}, []string{"nomatch"})
	got := f.Unmatched([]string{"rdma_port_info", "nfs_rpc_count_total"})
	if want := []string{"nfs_typo_*", "nomatch"}; !slices.Equal(got, want) {
		t.Fatalf("Unmatched = %v, want %v", got, want)
	}
}

func TestNilFilter(t *testing.T) {
	var f *Filter
	if !f.Allow("x") || !f.AllowAll() {
		t.Fatal("nil filter must allow everything")
	}
}

func TestUnmatchedWithRuntimeFamilies(t *testing.T) {
	f, _ := New([]string{"rdma_symbol_error", "rdma_port_*", "nvme_typo_*", "rd*"}, nil)
	got := f.Unmatched([]string{"rdma_*_total", "nvme_info"})
	if want := []string{"nvme_typo_*"}; !slices.Equal(got, want) {
		t.Fatalf("Unmatched = %v, want %v", got, want)
	}
}

// NIXL style: further names (the events a family is derived from) select a
// family as its own name does; the denylist removes it when it matches the
// name or every one of those names.
func TestAllowFamily(t *testing.T) {
	errs := []string{"agent_err_backend", "agent_err_not_found"}
	cases := []struct {
		allow, deny []string
		name        string
		by          []string
		want        bool
	}{
		{[]string{"agent_tx_bytes"}, nil, "agent_tx_last_bytes", []string{"agent_tx_bytes"}, true},
		{[]string{"agent_tx_bytes"}, nil, "agent_tx_last_bytes", nil, false}, // Allow's answer
		{[]string{"agent_err_*"}, nil, "agent_errors_total", errs, true},
		{[]string{"agent_err_backend"}, nil, "agent_errors_total", errs, true},
		{[]string{"agent_rx_*"}, nil, "agent_errors_total", errs, false},
		{[]string{"agent_errors"}, nil, "agent_errors_total", errs, true},
		{nil, []string{"agent_err_backend"}, "agent_errors_total", errs, true}, // one event of two denied
		{nil, []string{"agent_err_*"}, "agent_errors_total", errs, false},
		{nil, []string{"agent_xfer_time"}, "agent_xfer_time_us", []string{"agent_xfer_time"}, false},
		{nil, []string{"agent_errors_total"}, "agent_errors_total", errs, false},
		{nil, nil, "anything", []string{"x"}, true},
	}
	for _, c := range cases {
		f, err := New(c.allow, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.AllowFamily(c.name, c.by); got != c.want {
			t.Errorf("allow %v deny %v: AllowFamily(%q, %v) = %v, want %v", c.allow, c.deny, c.name, c.by, got, c.want)
		}
	}
	var nilFilter *Filter
	if !nilFilter.AllowFamily("x", []string{"y"}) {
		t.Error("a nil filter allows everything")
	}
}

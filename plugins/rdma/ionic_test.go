package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// AMD Pensando ionic RDMA devices (issue 16): their hw_counters names are
// defined by the NIC firmware (the driver asks it for a table of names at
// probe), so they differ between firmware versions. The plugin must export
// whatever the directory holds, as rdma_<name>_total, with the value read.
//
// testdata/ionic.ttar is the ionic_0 device of testdata/sysfs.ttar alone
// (AMD Pensando Pollara 400 at 0000:44:00.0, netdev enp68s0; no counters/
// directory: ionic has no PMA), 44 counters plus lifespan.
func TestIonicHWCountersFromTheDirectory(t *testing.T) {
	sys := sdktest.UnpackSysfs(t, "testdata/ionic.ttar")
	hw := filepath.Join(sys, "devices/pci0000:40/0000:40:01.1/0000:44:00.0/infiniband/ionic_0/ports/1/hw_counters")
	// A name newer firmware might add, in no list anywhere, and the value
	// the driver reads for a table entry whose offset or type fails its
	// check (all ones).
	for name, v := range map[string]string{"tx_rdma_future_drops": "12345", "rx_rdma_bad_entry": "18446744073709551615"} {
		if err := os.WriteFile(filepath.Join(hw, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Sysfs: sys, Config: map[string]any{"optional_counters": false}})
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v, errors %v", res.Status, res.Errors)
	}
	got := map[string]float64{}
	for _, mf := range res.Families(t) {
		for _, m := range mf.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}

	entries, err := os.ReadDir(hw)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Name() == "lifespan" {
			continue // a setting, exported as rdma_lifespan_milliseconds
		}
		raw, err := os.ReadFile(filepath.Join(hw, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		key := "rdma_" + e.Name() + "_total{device=ionic_0,port=1}"
		if v, ok := got[key]; !ok || v != float64(want) {
			t.Errorf("%s = %v (present %v), want %d", key, v, ok, want)
		}
		n++
	}
	if n != 46 {
		t.Errorf("%d counters in the fixture, want 44 plus the two the test adds", n)
	}
	// The firmware's own spelling is kept.
	if _, ok := got["rdma_resp_rx_outouf_seq_total{device=ionic_0,port=1}"]; !ok {
		t.Error("resp_rx_outouf_seq is not exported under its firmware name")
	}
	if v := got["rdma_port_info{device=ionic_0,port=1,netdev=enp68s0,link_layer=Ethernet,state=ACTIVE,phys_state=LINK_UP,link_width=4X,link_speed=400 Gb/sec,pci_addr=0000:44:00.0,is_vf=false,pf_device=}"]; v != 1 {
		var info []string
		for k := range got {
			if strings.HasPrefix(k, "rdma_port_info") {
				info = append(info, k)
			}
		}
		t.Errorf("rdma_port_info of ionic_0: %v", info)
	}
	// No PMA: no counters/ families (port_rcv_data and the like) for ionic.
	for k := range got {
		if strings.HasPrefix(k, "rdma_port_rcv_data_total") || strings.HasPrefix(k, "rdma_port_xmit_data_total") {
			t.Errorf("%s exported for a device without counters/", k)
		}
	}
}

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nlenc"
	"github.com/mdlayher/netlink/nltest"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

var allButMlx50 = []any{"mlx5_1", "mlx5_2", "ionic_0", "rxe0"}

// runGolden runs one scrape, which must succeed, compares it with the
// golden file and checks it with promtool; it returns the exposition.
func runGolden(t *testing.T, p *plugin, opts sdktest.Options, golden string) string {
	t.Helper()
	text := sdktest.CleanGolden(t, sdktest.Run(t, p, opts), golden)
	sdktest.PromtoolClean(t, text, promtoolExceptions)
	return text
}

// promtoolExceptions are the names promtool objects to that stay, because
// they are rdma_exporter's and its dashboards and alerts query them.
var promtoolExceptions = map[string]string{
	"rdma_lifespan_milliseconds":                "rdma_exporter's name (hw_counters/lifespan is in ms): use base unit seconds",
	"rdma_qp_counter_mode":                      "rdma_exporter's name (the kernel's QP counter mode): should not include type 'counter'",
	"rdma_optional_counter_enabled":             "rdma_exporter's name (the kernel's optional counters): should not include type 'counter'",
	"rdma_optional_counter_scrape_errors_total": "rdma_exporter's name: should not include type 'counter'",
}

// Fixture tree: mlx5 RoCE PF, its VF, native IB, ionic, rxe; sysfs only.
func TestGoldenFixtureTree(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	text := runGolden(t, newPlugin(), sdktest.Options{Sysfs: root, Config: map[string]any{"optional_counters": false}}, "testdata/fixtures.golden")
	sdktest.Contains(t, text,
		`rdma_port_info{device="mlx5_2",port="1",netdev="ens1f0v0",link_layer="Ethernet",state="ACTIVE",phys_state="LINK_UP",link_width="4X",link_speed="200 Gb/sec",pci_addr="0000:17:00.2",is_vf="true",pf_device="mlx5_0"} 1`,
		`rdma_port_info{device="rxe0",port="1",netdev="eno1",link_layer="Ethernet",state="ACTIVE",phys_state="LINK_UP",link_width="1X",link_speed="25 Gb/sec",pci_addr="",is_vf="false",pf_device=""} 1`,
		`rdma_port_info{device="mlx5_1",port="1",netdev="",link_layer="InfiniBand",state="ACTIVE",phys_state="LINK_UP",link_width="4X",link_speed="200 Gb/sec",pci_addr="0000:c4:00.0",is_vf="false",pf_device=""} 1`,
		"# TYPE rdma_lifespan_milliseconds gauge",
		"rdma_scrape_errors_total 0",
		`rdma_scrape_collector_success{collector="sysfs"} 1`,
		`rdma_resp_rx_outouf_seq_total{device="ionic_0",port="1"}`,
		`rdma_vl15_dropped_total{device="mlx5_0",port="1"}`,
	)
	sdktest.Lacks(t, text, "rdma_lifespan_total", `collector="optional-counters"`, "rdma_qp_")
}

// The real Linux 6.1 rxe capture.
func TestGoldenRxeReal(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/rxe-real.ttar")
	r := &replay{t: t, table: []exchangeFile{
		{real("req_get_dump.bin"), []string{real("resp_get_dump_01.bin"), real("resp_get_dump_02.bin")}},
		{real("req_stat_get_status_rxe0_p1.bin"), []string{real("resp_stat_get_status_rxe0_p1_01.bin"), real("resp_stat_get_status_rxe0_p1_02.bin")}},
		{real("req_stat_get_qp_mode_rxe0_p1.bin"), []string{real("resp_stat_get_qp_mode_rxe0_p1_01.bin"), real("resp_stat_get_qp_mode_rxe0_p1_02.bin")}},
	}}
	p := newPlugin()
	p.dial = r.dial
	text := runGolden(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"qp_counters": true}}, "testdata/rxe-real.golden")
	// mode none: no dump, so no scrape status.
	sdktest.Lacks(t, text, "rdma_qp_scrape_status")
	for _, m := range r.sent {
		if m.Header.Flags&netlink.Dump != 0 && int(m.Header.Type)&0x3ff == cmdStatGet {
			t.Error("QP dump sent although mode is none")
		}
	}
}

// mlx5_0 with cc_rx_ce_pkts enabled (hand-encoded messages), other devices
// excluded.
func TestGoldenOptionalCounters(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1_optional_on.bin")}
	p := newPlugin()
	p.dial = r.dial
	text := runGolden(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"exclude_devices": allButMlx50}}, "testdata/optional.golden")
	sdktest.Contains(t, text,
		`rdma_optional_counter_enabled{device="mlx5_0",port="1",counter="cc_rx_ce_pkts"} 1`,
		`rdma_optional_counter_enabled{device="mlx5_0",port="1",counter="rdma_tx_bytes"} 0`,
		`rdma_scrape_collector_success{collector="optional-counters"} 1`,
		"rdma_optional_counter_scrape_errors_total 0",
		"rdma_cc_rx_ce_pkts_total{",
	)
	sdktest.Lacks(t, text, "ionic_0", "rxe0") // excluded devices
}

// Enabled counter without a value: counted, no series.
func TestOptionalEnabledWithoutValue(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1.bin")} // cc_rx_ce_pkts missing
	p := newPlugin()
	p.dial = r.dial
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"exclude_devices": allButMlx50}})
	text := res.Text(t)
	if !strings.Contains(text, "rdma_optional_counter_scrape_errors_total 1") || strings.Contains(text, "rdma_cc_rx_ce_pkts_total") {
		t.Errorf("missing value not handled:\n%s", grep(text, "optional"))
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), "cc_rx_ce_pkts has no value") {
		t.Errorf("errors = %v", res.Errors)
	}
}

// Netlink unavailable: the sysfs part is intact, success gauge 0.
func TestOptionalDialFailure(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p := newPlugin()
	p.dial = func() (nlConn, error) { return nil, os.ErrPermission }
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root})
	sdktest.Contains(t, res.Text(t), `rdma_scrape_collector_success{collector="optional-counters"} 0`,
		"rdma_optional_counter_scrape_errors_total 1", `rdma_port_info{device="mlx5_0"`)
}

// A host without RDMA devices refuses NETLINK_RDMA sockets: no device
// means netlink is not asked at all, and that is success, not an error.
func TestNoDevicesSkipsNetlink(t *testing.T) {
	p := newPlugin()
	dialed := false
	p.dial = func() (nlConn, error) { dialed = true; return nil, errors.New("protocol not supported") }
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: t.TempDir(), Config: map[string]any{"qp_counters": true}})
	text := res.Text(t)
	if dialed || len(res.Errors) != 0 {
		t.Fatalf("dialed=%v errors=%v", dialed, res.Errors)
	}
	sdktest.Contains(t, text, `rdma_scrape_collector_success{collector="optional-counters"} 1`,
		`rdma_scrape_collector_success{collector="qp-counters"} 1`, "rdma_optional_counter_scrape_errors_total 0")
}

func qpModeReply(mode, mask uint32) []netlink.Message {
	return []netlink.Message{{
		Header: netlink.Header{Type: nldevType(cmdStatGet)},
		Data: nltest.MustMarshalAttributes([]netlink.Attribute{
			{Type: attrDevIndex, Data: u32(0)}, {Type: attrDevName, Data: []byte("mlx5_0\x00")},
			{Type: attrPortIndex, Data: u32(1)}, {Type: attrStatMode, Data: u32(mode)},
			{Type: attrStatAutoModeMask, Data: u32(mask)},
		}),
	}, {Header: netlink.Header{Type: netlink.Error, Flags: 0x100}, Data: make([]byte, 20)}}
}

func u32(v uint32) []byte { return nlenc.Uint32Bytes(v) }
func u64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

func qpEntry(qpType uint8, pid bool, vals map[string]uint64) netlink.Attribute {
	attrs := []netlink.Attribute{{Type: attrPortIndex, Data: u32(1)}, {Type: 79, Data: u32(4)},
		{Type: attrStatMode, Data: u32(counterModeAuto)}, {Type: attrResType, Data: []byte{qpType}}}
	if pid {
		attrs = append(attrs, netlink.Attribute{Type: attrResPID, Data: u32(42)})
	}
	var hw []netlink.Attribute
	for _, n := range []string{"rx_write_requests", "rdma_rx_bytes", "not_exported"} {
		if v, ok := vals[n]; ok {
			hw = append(hw, netlink.Attribute{Type: attrStatHWCounterEntry | 0x8000, Data: nltest.MustMarshalAttributes([]netlink.Attribute{
				{Type: attrStatHWCounterName, Data: []byte(n + "\x00")}, {Type: attrStatHWCounterValue, Data: u64(v)}})})
		}
	}
	attrs = append(attrs, netlink.Attribute{Type: attrStatHWCounters | 0x8000, Data: nltest.MustMarshalAttributes(hw)})
	return netlink.Attribute{Type: attrStatCounterEntry, Data: nltest.MustMarshalAttributes(attrs)}
}

func qpDumpReply(entries ...netlink.Attribute) []netlink.Message {
	return []netlink.Message{{
		Header: netlink.Header{Type: nldevType(cmdStatGet), Flags: netlink.Multi},
		Data: nltest.MustMarshalAttributes([]netlink.Attribute{
			{Type: attrDevIndex, Data: u32(0)}, {Type: attrDevName, Data: []byte("mlx5_0\x00")},
			{Type: attrStatCounter, Data: nltest.MustMarshalAttributes(entries)},
		}),
	}, {Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)}}
}

func qpKeys() (mode, dump string) {
	m := netlink.Message{Header: netlink.Header{Type: nldevType(cmdStatGet), Flags: flagsDoit},
		Data: nltest.MustMarshalAttributes([]netlink.Attribute{{Type: attrDevIndex, Data: u32(0)}, {Type: attrPortIndex, Data: u32(1)},
			{Type: attrStatMode, Data: u32(2)}, {Type: attrStatRes, Data: u32(attrResQP)}})}
	d := netlink.Message{Header: netlink.Header{Type: nldevType(cmdStatGet), Flags: flagsDump},
		Data: nltest.MustMarshalAttributes([]netlink.Attribute{{Type: attrDevIndex, Data: u32(0)}, {Type: attrPortIndex, Data: u32(1)},
			{Type: attrStatRes, Data: u32(attrResQP)}})}
	return reqKey(m), reqKey(d)
}

func TestGoldenQPCounters(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	mk, dk := qpKeys()
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1_optional_on.bin"), override: map[string][]netlink.Message{
		mk: qpModeReply(counterModeAuto, autoMaskType),
		dk: qpDumpReply(
			qpEntry(2, false, map[string]uint64{"rx_write_requests": 10, "rdma_rx_bytes": 1000, "not_exported": 7}),
			qpEntry(2, false, map[string]uint64{"rx_write_requests": 5, "rdma_rx_bytes": 24}),
			qpEntry(4, false, map[string]uint64{"rx_write_requests": 1}),
			qpEntry(2, true, map[string]uint64{"rx_write_requests": 1000000}), // by PID: not aggregated
		),
	}}
	p := newPlugin()
	p.dial = r.dial
	text := runGolden(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{
		"exclude_devices": allButMlx50, "qp_counters": true, "optional_counters": false,
	}}, "testdata/qp.golden")
	sdktest.Contains(t, text,
		`rdma_qp_rx_write_requests_total{device="mlx5_0",port="1",qp_type="RC"} 15`,
		`rdma_qp_rx_write_requests_total{device="mlx5_0",port="1",qp_type="UD"} 1`,
		`rdma_qp_rx_bytes_total{device="mlx5_0",port="1",qp_type="RC"} 1024`,
		`rdma_qp_scrape_status{device="mlx5_0",port="1",result="ok"} 1`,
		`rdma_qp_counter_mode{device="mlx5_0",port="1",mode="auto"} 1`,
		`rdma_qp_auto_mask{device="mlx5_0",port="1",criteria="type"} 1`,
		`rdma_qp_auto_mask{device="mlx5_0",port="1",criteria="pid"} 0`,
		`rdma_scrape_collector_success{collector="qp-counters"} 1`,
	)
	sdktest.Lacks(t, text, "not_exported", "rdma_optional_counter")
}

func TestQPOverflow(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	mk, dk := qpKeys()
	var many []netlink.Message
	one := qpDumpReply(qpEntry(2, false, map[string]uint64{"rx_write_requests": 1}))
	for range qpDumpMaxMsgs + 1 {
		many = append(many, one[0])
	}
	many = append(many, one[1])
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1.bin"), override: map[string][]netlink.Message{
		mk: qpModeReply(counterModeAuto, autoMaskType), dk: many}}
	p := newPlugin()
	p.dial = r.dial
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"exclude_devices": allButMlx50, "qp_counters": true, "optional_counters": false}})
	text := res.Text(t)
	sdktest.Contains(t, text, `rdma_qp_scrape_status{device="mlx5_0",port="1",result="overflow"} 1`, "rdma_qp_scrape_errors_total 1",
		`rdma_port_xmit_data_total{device="mlx5_0",port="1"}`)
	sdktest.Lacks(t, text, "rdma_qp_rx_write_requests_total") // totals of an overflowed port
}

func grep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCountersExtAndDeviceInfo: an mlx4 port of an old kernel, whose
// counters/ saturate at 32 bits while counters_ext/ holds the 64-bit
// values (node_exporter exports 1.85e7 received words where the 32-bit
// file says 4294967295): the 64-bit value wins, under the counters/ name.
// The device's identity is rdma_device_info.
func TestCountersExtAndDeviceInfo(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "devices", "pci0000:00", "0000:00:02.0", "0000:01:00.0")
	ib := filepath.Join(dev, "infiniband", "mlx4_0")
	for f, v := range map[string]string{
		"board_id": "SM_1141000001000", "fw_ver": "2.31.5050", "hca_type": "MT4099", "node_guid": "0002:c903:0043:6c50",
		"ports/1/state": "4: ACTIVE", "ports/1/phys_state": "5: LinkUp", "ports/1/rate": "40 Gb/sec (4X QDR)", "ports/1/link_layer": "InfiniBand",
		"ports/1/counters/port_rcv_data":                "4294967295",
		"ports/1/counters/port_xmit_data":               "4294967295",
		"ports/1/counters/port_rcv_packets":             "4294967295",
		"ports/1/counters/symbol_error":                 "0",
		"ports/1/counters_ext/port_rcv_data_64":         "18500000",
		"ports/1/counters_ext/port_xmit_data_64":        "18400000",
		"ports/1/counters_ext/port_rcv_packets_64":      "9000000000",
		"ports/1/counters_ext/port_unicast_rcv_packets": "8999999000",
	} {
		writeFile(t, filepath.Join(ib, f), v+"\n")
	}
	if err := os.MkdirAll(filepath.Join(root, "class", "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/pci0000:00/0000:00:02.0/0000:01:00.0/infiniband/mlx4_0", filepath.Join(root, "class", "infiniband", "mlx4_0")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../0000:01:00.0", filepath.Join(ib, "device")); err != nil {
		t.Fatal(err)
	}
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Sysfs: root, Config: map[string]any{"optional_counters": false, "qp_counters": false}})
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v, errors %v", res.Status, res.Errors)
	}
	text := res.Text(t)
	for _, want := range []string{
		`rdma_port_rcv_data_total{device="mlx4_0",port="1"} 1.85e+07`,
		`rdma_port_xmit_data_total{device="mlx4_0",port="1"} 1.84e+07`,
		`rdma_port_rcv_packets_total{device="mlx4_0",port="1"} 9e+09`,
		`rdma_port_unicast_rcv_packets_total{device="mlx4_0",port="1"} 8.999999e+09`,
		`rdma_symbol_error_total{device="mlx4_0",port="1"} 0`,
		`rdma_device_info{device="mlx4_0",board_id="SM_1141000001000",firmware_version="2.31.5050",hca_type="MT4099",node_guid="0002:c903:0043:6c50"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("exposition lacks %s", want)
		}
	}
	sdktest.Lacks(t, text, "4.294967295e+09", "_64_total")
}

// The host's --device.exclude reaches the plugin and works like
// exclude_devices: the devices it rejects are neither read from sysfs nor
// asked about over netlink (the replay fails on any request but mlx5_0's),
// so the output is the same as with exclude_devices.
func TestHostDeviceExcludeNotTouched(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	r := &replay{t: t, table: synthTable("resp_stat_get_dev0_port1_optional_on.bin")}
	p := newPlugin()
	p.dial = r.dial
	text := runGolden(t, p, sdktest.Options{Sysfs: root, DeviceExclude: "^(mlx5_[12]|ionic_0|rxe0)$"}, "testdata/optional.golden")
	sdktest.Lacks(t, text, "ionic_0", "rxe0", `device="mlx5_1"`, `device="mlx5_2"`)
}

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fixtureFiles feeds the mlx5 sample to the PF netdev and, to prove they
// are skipped, to the VF's and the IPoIB netdev as well; eno1 (rxe0's
// parent) has no statistics in this set.
func fixtureFiles() map[string]string {
	return map[string]string{
		"ens1f0np0": "testdata/mlx5_ens1f0np0.txt",
		"ens1f0v0":  "testdata/mlx5_ens1f0np0.txt",
		"ibp196s0":  "testdata/mlx5_ens1f0np0.txt",
		"enp68s0":   "testdata/ionic_enp.txt",
	}
}

func newTestPlugin(src statsSource) *plugin {
	p := newPlugin()
	p.src = src
	p.std = noStdStats{}
	return p
}

// runGolden runs one scrape, which must succeed, compares it with the
// golden file and checks it with promtool.
func runGolden(t *testing.T, p *plugin, opts sdktest.Options, golden string) *sdktest.Result {
	t.Helper()
	res := sdktest.Run(t, p, opts)
	sdktest.PromtoolClean(t, sdktest.CleanGolden(t, res, golden), promtoolExceptions)
	return res
}

func TestRDMAGolden(t *testing.T) {
	src := newFakeSource(t, fixtureFiles())
	runGolden(t, newTestPlugin(src), sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")}, "testdata/rdma.golden")
	// VF (mlx5_2) and native IB (mlx5_1) ports are never read.
	if src.calls["ens1f0v0"] != 0 || src.calls["ibp196s0"] != 0 {
		t.Errorf("read VF/IB netdevs: %v", src.calls)
	}
	// One read per netdev per scrape, although PFC and HW both use it.
	if src.calls["ens1f0np0"] != 1 {
		t.Errorf("ens1f0np0 read %d times", src.calls["ens1f0np0"])
	}
}

// series returns the label sets ("k=v,...") of a family, or nil.
func series(t *testing.T, res *sdktest.Result, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, mf := range res.Families(t) {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labelKey(m)] = value(m)
		}
	}
	return out
}

func labelKey(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

func hasDevice(s map[string]float64, device string) bool {
	for k := range s {
		if strings.HasPrefix(k, "device="+device+",") || k == "device="+device {
			return true
		}
	}
	return false
}

func TestScoping(t *testing.T) {
	const (
		vport        = "rdma_netdev_vport_rdma_bytes_total"
		vportPackets = "rdma_netdev_vport_rdma_packets_total"
		pfcFrames    = "rdma_roce_pfc_pause_frames_total"
		phyRxBits    = "rdma_phy_rx_bits_total"
		phyLinkDown  = "rdma_phy_link_down_events_total"
	)
	// seriesOf is a family and a device: the device has a series of the
	// family, or ("" device) the family has any series.
	type seriesOf struct{ family, device string }
	type scopingCase struct {
		name    string
		mutate  func(t *testing.T, root string) // edits the fixture tree
		files   map[string]string               // added to fixtureFiles
		present []seriesOf                      // exported
		absent  []seriesOf                      // not exported
		check   func(t *testing.T, res *sdktest.Result)
	}
	cases := []scopingCase{
		{
			name:   "baseline PF has vport, VF and IB ports skipped, missing priorities absent",
			absent: []seriesOf{{pfcFrames, "mlx5_2"}, {pfcFrames, "mlx5_1"}, {phyLinkDown, "mlx5_2"}, {phyLinkDown, "mlx5_1"}},
			check: func(t *testing.T, res *sdktest.Result) {
				v := series(t, res, vport)
				if v["device=mlx5_0,port=1,netdev=ens1f0np0,direction=tx,traffic=unicast"] != 1873496402117632 {
					t.Errorf("vport tx unicast = %v", v)
				}
				pfc := series(t, res, pfcFrames)
				if len(pfc) != 2 || pfc["device=mlx5_0,port=1,netdev=ens1f0np0,direction=rx,priority=3"] != 1823104 {
					t.Errorf("pfc frames = %v (only priority 3 is PFC-enabled)", pfc)
				}
			},
		},
		{
			name:    "rxe0 (no PCI device) gets PFC but no vport",
			files:   map[string]string{"eno1": "testdata/mlx5_ens1f0np0.txt"},
			present: []seriesOf{{pfcFrames, "rxe0"}, {phyRxBits, "rxe0"}},
			absent:  []seriesOf{{vport, "rxe0"}},
		},
		{
			name: "no sriov_totalvfs omits vport",
			mutate: func(t *testing.T, root string) {
				rm(t, filepath.Join(root, "bus/pci/devices/0000:17:00.0/sriov_totalvfs"))
			},
			present: []seriesOf{{phyRxBits, "mlx5_0"}}, // the other HW families stay
			absent:  []seriesOf{{vport, ""}, {vportPackets, ""}},
		},
		{
			name: "VF without physfn is treated as not-VF",
			mutate: func(t *testing.T, root string) {
				rm(t, filepath.Join(root, "bus/pci/devices/0000:17:00.2/physfn"))
			},
			present: []seriesOf{{pfcFrames, "mlx5_2"}},
			absent:  []seriesOf{{vport, "mlx5_2"}}, // no sriov_totalvfs on the VF function
		},
		{
			name: "shared netdev omits vport and emits HW once",
			mutate: func(t *testing.T, root string) {
				for i := range 4 {
					write(t, filepath.Join(root, "class/infiniband/ionic_0/ports/1/gid_attrs/ndevs", string(rune('0'+i))), "ens1f0np0\n")
				}
			},
			present: []seriesOf{{pfcFrames, "ionic_0"}, {pfcFrames, "mlx5_0"}}, // PFC is per (device, port)
			absent:  []seriesOf{{vport, ""}},                                   // two owners
			check: func(t *testing.T, res *sdktest.Result) {
				if n := len(series(t, res, phyRxBits)); n != 1 {
					t.Errorf("HW family emitted %d times for one netdev", n)
				}
			},
		},
	}
	for _, rep := range []string{"pf0vf1", "c1pf0vf0", "pf0hpf", "pf1sf3"} {
		cases = append(cases, scopingCase{
			name: "representor " + rep + " omits vport",
			mutate: func(t *testing.T, root string) {
				write(t, filepath.Join(root, "class/net/ens1f0np0/phys_port_name"), rep+"\n")
			},
			absent: []seriesOf{{vport, ""}},
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
			if c.mutate != nil {
				c.mutate(t, root)
			}
			files := fixtureFiles()
			for k, v := range c.files {
				files[k] = v
			}
			res := sdktest.Run(t, newTestPlugin(newFakeSource(t, files)), sdktest.Options{Sysfs: root})
			if res.Status != nil || len(res.Errors) != 0 {
				t.Fatalf("status %v errors %v", res.Status, res.Errors)
			}
			has := func(s seriesOf) bool {
				got := series(t, res, s.family)
				return (s.device == "" && len(got) != 0) || (s.device != "" && hasDevice(got, s.device))
			}
			for _, s := range c.present {
				if !has(s) {
					t.Errorf("%s: no series of %q", s.family, s.device)
				}
			}
			for _, s := range c.absent {
				if has(s) {
					t.Errorf("%s: series of %q: %v", s.family, s.device, series(t, res, s.family))
				}
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	// class/net/<if> is a symlink into devices/; write through it.
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDevOutOfBufferAlias(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	for _, name := range []string{"dev_out_of_buffer", "dev_internal_queue_oob"} {
		src := &fakeSource{tables: map[string]*driverStats{"ens1f0np0": {Names: []string{name}, Values: []uint64{42}}}, errs: map[string]error{}, calls: map[string]int{}}
		res := sdktest.Run(t, newTestPlugin(src), sdktest.Options{Sysfs: root})
		got := series(t, res, "rdma_netdev_dev_out_of_buffer_total")
		if got["device=mlx5_0,port=1,netdev=ens1f0np0"] != 42 || len(got) != 1 {
			t.Errorf("%s: got %v", name, got)
		}
	}
}

func TestReadErrorIsPartial(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	src := newFakeSource(t, fixtureFiles())
	src.errs["ens1f0np0"] = errors.New("ETHTOOL_GSTATS: no such device")
	p := newTestPlugin(src)
	c := sdktest.Client(t, p, sdktest.Options{Sysfs: root})
	var res *sdktest.Result
	for range 2 {
		res = sdktest.Collect(t, c, 0)
	}
	if res.Status != nil {
		t.Fatalf("scrape failed: %v", res.Status)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), "mlx5_0 port 1") {
		t.Fatalf("errors = %v", res.Errors)
	}
	// Cumulative: two scrapes, one failing netdev each.
	if v := series(t, res, "rdma_roce_pfc_scrape_errors_total")[""]; v != 2 {
		t.Errorf("pfc scrape errors = %v, want 2", v)
	}
	if v := series(t, res, "rdma_netdev_scrape_errors_total")[""]; v != 2 {
		t.Errorf("netdev scrape errors = %v, want 2", v)
	}
	// Labelled with the source that failed (the read for the rdma families;
	// driver_stats is off), and rdma_exporter's ethtool sub-collector failed.
	if got := res.Errors[0].GetCollector(); got != "rdma_stats" {
		t.Errorf("partial error collector = %q, want rdma_stats", got)
	}
	errs := series(t, res, "ethtool_collection_errors_total")
	if errs["collector=rdma_stats"] != 2 {
		t.Errorf("collection errors = %v, want rdma_stats at 2", errs)
	}
	if _, ok := errs["collector=driver_stats"]; ok {
		t.Errorf("collection errors = %v: driver_stats is off and must have no series", errs)
	}
	if v := series(t, res, "rdma_scrape_collector_success")["collector=ethtool"]; v != 0 {
		t.Errorf("rdma_scrape_collector_success{collector=ethtool} = %v, want 0", v)
	}
}

func TestBrokenSysfsIsPartial(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "class"), "not a directory\n")
	res := sdktest.Run(t, newTestPlugin(newFakeSource(t, nil)), sdktest.Options{Sysfs: root, Config: map[string]any{"driver_stats": true}})
	if res.Status != nil {
		t.Fatalf("scrape failed: %v", res.Status)
	}
	if len(res.Errors) != 2 {
		t.Fatalf("want an rdma_sysfs and a netdevs error, got %v", res.Errors)
	}
	errs := series(t, res, "ethtool_collection_errors_total")
	if errs["collector=netdevs"] != 1 || errs["collector=rdma_sysfs"] != 1 {
		t.Errorf("collection errors = %v, want netdevs and rdma_sysfs at 1", errs)
	}
}

func TestNoRDMAIsEmptyNotError(t *testing.T) {
	res := sdktest.Run(t, newTestPlugin(newFakeSource(t, nil)), sdktest.Options{Sysfs: t.TempDir()})
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v errors %v", res.Status, res.Errors)
	}
	if len(series(t, res, "rdma_roce_pfc_pause_frames_total")) != 0 {
		t.Fatal("series without RDMA devices")
	}
}

func TestAllowlistPushdown(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	src := newFakeSource(t, fixtureFiles())
	res := sdktest.Run(t, newTestPlugin(src), sdktest.Options{Sysfs: root, EnabledMetrics: []string{"rdma_netdev_scrape_errors_total"}})
	if len(src.calls) != 0 {
		t.Fatalf("stats read although every family reading them is disabled: %v", src.calls)
	}
	if len(series(t, res, "rdma_netdev_scrape_errors_total")) != 1 {
		t.Fatal("error counter missing")
	}
}

func TestDriverStatsGolden(t *testing.T) {
	src := newFakeSource(t, fixtureFiles())
	res := runGolden(t, newTestPlugin(src), sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sysfs.ttar"), Config: map[string]any{
		"rdma": false, "driver_stats": true, "include": "^(ens1f0np0|enp68s0|eno1)$",
	}}, "testdata/driver_stats.golden")
	if src.calls["ens1f0v0"] != 0 {
		t.Error("include regex not applied")
	}
	if strings.Contains(res.Text(t), "rdma_roce") {
		t.Error("rdma families with rdma: false")
	}
}

func TestDriverStatsCapAndFilter(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	p := newTestPlugin(newFakeSource(t, fixtureFiles()))
	c := sdktest.Client(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{
		"rdma": false, "driver_stats": true, "include": "^ens1f0np0$",
		"driver_stat_include": "_phy$", "driver_stat_exclude": "^rx_err_lane", "max_driver_stats_per_netdev": 10,
	}})
	sdktest.Collect(t, c, 0)
	res := sdktest.Collect(t, c, 0)
	plain := series(t, res, "ethtool_driver_stat_total")
	if len(plain) != 10 {
		t.Errorf("%d series, cap is 10", len(plain))
	}
	for k := range plain {
		if !strings.HasSuffix(k, "_phy") || strings.Contains(k, "rx_err_lane") {
			t.Errorf("filter let %s through", k)
		}
	}
	// 44 names end in _phy, 4 are lanes: 40 pass the filter, 30 dropped.
	if v := series(t, res, "ethtool_driver_stats_dropped")["netdev=ens1f0np0"]; v != 30 {
		t.Errorf("dropped = %v, want 30", v)
	}
	if v := series(t, res, "ethtool_driver_stats_capped_total")["netdev=ens1f0np0"]; v != 2 {
		t.Errorf("capped = %v, want 2 (two scrapes)", v)
	}
}

func TestSplitQueue(t *testing.T) {
	for name, want := range map[string][2]string{
		"rx_queue_0_packets":     {"0", "rx_packets"},
		"tx_queue_12_bytes":      {"12", "tx_bytes"},
		"rx1_packets":            {"1", "rx_packets"},
		"tx0_xdp_xmit":           {"0", "tx_xdp_xmit"},
		"ch1_events":             {"1", "ch_events"},
		"tx_3_pkts":              {"3", "tx_pkts"},
		"[2]: rx_ucast_packets":  {"2", "rx_ucast_packets"},
		"queue_0_tx_cnt":         {"0", "tx_cnt"},
		"tx-4.tx_packets":        {"4", "tx_packets"},
		"rx_65_to_127_bytes_phy": {"", ""},
		"rx_prio0_bytes":         {"", ""},
		"rx_packets":             {"", ""},
	} {
		q, s, ok := splitQueue(name)
		if want[0] == "" {
			if ok {
				t.Errorf("%s: split into %s/%s", name, q, s)
			}
			continue
		}
		if !ok || q != want[0] || s != want[1] {
			t.Errorf("%s: got %q %q %v, want %v", name, q, s, ok, want)
		}
	}
}

// promtoolExceptions are the names promtool objects to that stay, because
// a seed exporter's dashboards and alerts query them.
var promtoolExceptions = map[string]string{
	"rdma_phy_rx_bits_total":           `rdma_exporter's name (rx_bits_phy): use base unit "bytes"`,
	"rdma_phy_rx_corrected_bits_total": `rdma_exporter's name (rx_corrected_bits_phy): use base unit "bytes"`,
	"ionic_port_rx_bits_phy_total":     `the ionic driver's rx_bits_phy, named as rdma_phy_rx_bits_total is: use base unit "bytes"`,
}

// A device whose ports cannot be listed (its directory behind the class
// link unreadable: a sandbox without the devices grant, or mode 000) is a
// partial error of rdma_sysfs, not a NIC that silently has no counters; the
// other devices are still read.
func TestUnreadablePortsArePartial(t *testing.T) {
	root := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	ports := filepath.Join(root, "devices/pci0000:16/0000:16:02.0/0000:17:00.0/infiniband/mlx5_0/ports")
	if os.Geteuid() == 0 {
		// root reads through mode 000; a file where the directory should be
		// fails the listing the same way (any error but "does not exist").
		if err := os.RemoveAll(ports); err != nil {
			t.Fatal(err)
		}
		write(t, ports, "not a directory\n")
	} else {
		if err := os.Chmod(ports, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ports, 0o755) })
	}
	res := sdktest.Run(t, newTestPlugin(newFakeSource(t, fixtureFiles())), sdktest.Options{Sysfs: root})
	if res.Status != nil {
		t.Fatalf("scrape failed: %v", res.Status)
	}
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorRDMASysfs || !strings.Contains(res.Errors[0].GetMessage(), "list ports of mlx5_0") {
		t.Fatalf("errors = %v, want one rdma_sysfs error naming mlx5_0", res.Errors)
	}
	if v := series(t, res, "ethtool_collection_errors_total")["collector=rdma_sysfs"]; v != 1 {
		t.Errorf("ethtool_collection_errors_total{collector=rdma_sysfs} = %v, want 1", v)
	}
	if len(series(t, res, "rdma_roce_pfc_pause_frames_total")) != 0 {
		t.Error("mlx5_0's PFC families without its ports")
	}
	if _, ok := series(t, res, "rdma_phy_rx_bits_total")["device=ionic_0,port=1,netdev=enp68s0"]; !ok {
		t.Errorf("the other devices must still be read: %v", series(t, res, "rdma_phy_rx_bits_total"))
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// ionicSource serves the ionic capture (testdata/ionic_enp.txt, AMD
// Pensando Pollara enp68s0, 4 queues) with the driver name ETHTOOL_GDRVINFO
// reports, and the mlx5 capture as the other tests do.
func ionicSource(t *testing.T) *fakeSource {
	t.Helper()
	src := newFakeSource(t, fixtureFiles())
	src.tables["enp68s0"].Driver = ionicDriver
	src.tables["ens1f0np0"].Driver = "mlx5_core"
	return src
}

func TestIonicFamily(t *testing.T) {
	for stat, want := range map[string][3]string{ // family, label, index
		"tx_packets":              {"ionic_lif_tx_packets_total", "", ""},
		"hw_rx_over_errors":       {"ionic_lif_hw_rx_over_errors_total", "", ""},
		"xdp_redirect":            {"ionic_lif_xdp_redirect_total", "", ""},
		"tx_0_pkts":               {"ionic_lif_queue_tx_pkts_total", "queue", "0"},
		"rx_12_xdp_redirect":      {"ionic_lif_queue_rx_xdp_redirect_total", "queue", "12"},
		"frames_rx_ok":            {"ionic_port_frames_rx_ok_total", "", ""},
		"frames_rx_1024b_1518b":   {"ionic_port_frames_rx_1024b_1518b_total", "", ""},
		"octets_tx_total":         {"ionic_port_octets_tx_total_total", "", ""},
		"frames_tx_pri_3":         {"ionic_port_frames_tx_pri_total", "priority", "3"},
		"rx_pripause_7_1us_count": {"ionic_port_rx_pripause_1us_total", "priority", "7"},
		"rx_pause_1us_count":      {"ionic_port_rx_pause_1us_total", "", ""},
		"rx_bits_phy":             {"ionic_port_rx_bits_phy_total", "", ""},
		"frames_tx_truncated":     {"ionic_port_frames_tx_truncated_total", "", ""},
		"Odd-Name.x":              {"ionic_lif_odd_name_x_total", "", ""},
	} {
		f, l, i, _ := ionicFamily(stat)
		if got := [3]string{f, l, i}; got != want {
			t.Errorf("ionicFamily(%q) = %v, want %v", stat, got, want)
		}
	}
}

// TestIonicGolden: the ionic families of the capture, through the plugin's
// ioctl-path interface, only for the netdev whose driver is ionic.
func TestIonicGolden(t *testing.T) {
	src := ionicSource(t)
	opts := sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sysfs.ttar"), EnabledMetrics: []string{"ionic_*"}}
	res := sdktest.Run(t, newTestPlugin(src), opts)
	text := sdktest.CleanGolden(t, res, "testdata/ionic.golden")
	sdktest.PromtoolClean(t, text, promtoolExceptions)
	sdktest.Lacks(t, text, "ens1f0np0", "rdma_")

	// Every statistic of the capture is in exactly one series.
	st := src.tables["enp68s0"]
	n := 0
	for _, mf := range res.Families(t) {
		n += len(mf.GetMetric())
	}
	if n != len(st.Names) {
		t.Errorf("%d series for %d statistics", n, len(st.Names))
	}
	// The LIF totals equal the sums over queues (the capture is consistent,
	// so this checks the queue label splits nothing wrongly).
	for lif, queue := range map[string]string{
		"ionic_lif_tx_packets_total": "ionic_lif_queue_tx_pkts_total",
		"ionic_lif_rx_bytes_total":   "ionic_lif_queue_rx_bytes_total",
		"ionic_lif_tx_tso_total":     "ionic_lif_queue_tx_tso_total",
	} {
		total := series(t, res, lif)["netdev=enp68s0"]
		var sum float64
		qs := series(t, res, queue)
		for _, v := range qs {
			sum += v
		}
		if len(qs) != 4 || total == 0 || sum != total {
			t.Errorf("%s = %v, sum of %d queues of %s = %v", lif, total, len(qs), queue, sum)
		}
	}
	pri := series(t, res, "ionic_port_frames_rx_pri_total")
	if len(pri) != 8 || pri["netdev=enp68s0,priority=3"] != 534695682651 {
		t.Errorf("ionic_port_frames_rx_pri_total: %v", pri)
	}
}

// The ionic families need the driver's name: a table from another driver
// with the same statistic names is not exported as ionic.
func TestIonicOnlyForTheIonicDriver(t *testing.T) {
	src := ionicSource(t)
	src.tables["enp68s0"].Driver = "mlx5_core"
	res := sdktest.Run(t, newTestPlugin(src), sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")})
	if text := res.Text(t); strings.Contains(text, "ionic_lif_") || strings.Contains(text, "ionic_port_") {
		t.Error("ionic families for a netdev whose driver is not ionic")
	}
	// And with it, the rdma_* families are unchanged beside them.
	src = ionicSource(t)
	res = sdktest.Run(t, newTestPlugin(src), sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")})
	if _, ok := series(t, res, "rdma_phy_rx_bits_total")["device=ionic_0,port=1,netdev=enp68s0"]; !ok {
		t.Error("rdma_phy_rx_bits_total of ionic_0 missing next to the ionic families")
	}
	if got := series(t, res, "ionic_lif_tx_packets_total")["netdev=enp68s0"]; got != 170906120 {
		t.Errorf("ionic_lif_tx_packets_total = %v", got)
	}
}

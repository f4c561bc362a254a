package guard_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/sdk"
)

// TestDeviceFilterAppliesToEveryPlugin: excluding a device removes its
// series from every family that names it, whichever plugin wrote it (the
// rdma plugin's port counters and the ethtool plugin's rdma_* families),
// keeps families without a device label, and is not counted as a drop.
func TestDeviceFilterAppliesToEveryPlugin(t *testing.T) {
	portRcv := sdk.NewDesc("rdma_port_rcv_data_total", sdk.Counter, "", "device", "port")
	pfc := sdk.NewDesc("rdma_roce_pfc_pause_frames_total", sdk.Counter, "", "device", "port", "netdev")
	driver := sdk.NewDesc("ethtool_driver_stat_total", sdk.Counter, "", "netdev", "stat")
	rdma := batchtest.Record(func(w *sdk.Writer) {
		w.Counter(portRcv, 1, "mlx5_0", "1")
		w.Counter(portRcv, 2, "mlx5_1", "1")
		w.Counter(portRcv, 3, "mlx5_10", "1")
	})
	ethtool := batchtest.Record(func(w *sdk.Writer) {
		w.Counter(pfc, 4, "mlx5_0", "1", "ens1f0np0")
		w.Counter(pfc, 5, "mlx5_1", "1", "ens1f1np1")
		w.Counter(driver, 6, "ens1f1np1", "rx_bytes")
	})
	in := []guard.Input{{Plugin: "ethtool", Batches: ethtool}, {Plugin: "rdma", Batches: rdma}}
	for _, tc := range []struct {
		name             string
		include, exclude string
		want             map[string]string
		filtered         map[string]int
	}{
		{"exclude one", "", `^mlx5_1$`, map[string]string{
			"rdma_port_rcv_data_total":         "mlx5_0,1 mlx5_10,1",
			"rdma_roce_pfc_pause_frames_total": "mlx5_0,1,ens1f0np0",
			"ethtool_driver_stat_total":        "ens1f1np1,rx_bytes",
		}, map[string]int{"rdma": 1, "ethtool": 1}},
		{"include then exclude", `^mlx5_1`, `0$`, map[string]string{
			"rdma_port_rcv_data_total":         "mlx5_1,1",
			"rdma_roce_pfc_pause_frames_total": "mlx5_1,1,ens1f1np1",
			"ethtool_driver_stat_total":        "ens1f1np1,rx_bytes",
		}, map[string]int{"rdma": 2, "ethtool": 1}},
		{"no filter", "", "", map[string]string{
			"rdma_port_rcv_data_total":         "mlx5_0,1 mlx5_1,1 mlx5_10,1",
			"rdma_roce_pfc_pause_frames_total": "mlx5_0,1,ens1f0np0 mlx5_1,1,ens1f1np1",
		}, map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &guard.DeviceFilter{}
			if tc.include != "" {
				f.Include = regexp.MustCompile(tc.include)
			}
			if tc.exclude != "" {
				f.Exclude = regexp.MustCompile(tc.exclude)
			}
			r := guard.Merge(in, guard.Options{Devices: f})
			for fam, want := range tc.want {
				if got := strings.Join(series(r, fam), " "); got != want {
					t.Errorf("%s = %q, want %q", fam, got, want)
				}
			}
			if len(r.Drops) != 0 {
				t.Errorf("filtered series counted as drops: %v", r.Drops)
			}
			for p, n := range tc.filtered {
				if r.DeviceFiltered[p] != n {
					t.Errorf("DeviceFiltered = %v, want %v", r.DeviceFiltered, tc.filtered)
				}
			}
			if r.Series["rdma"]+r.DeviceFiltered["rdma"] != 3 {
				t.Errorf("rdma: %d exposed + %d filtered, want 3 in all", r.Series["rdma"], r.DeviceFiltered["rdma"])
			}
		})
	}
}

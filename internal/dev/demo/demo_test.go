package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/dev/demo/demotest"
)

// make demo serves every shipped plugin's series, read from the fixtures,
// without an error; as root each plugin is in its sandbox.
func TestDemoServesEveryPlugin(t *testing.T) {
	h := demotest.Start(t, "../../..")
	h.Get(t, "/metrics") // a first scrape, so counters exist
	body := h.Get(t, "/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	perPlugin := func(family, plugin string) (float64, bool) {
		for _, m := range mfs[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" && l.GetValue() == plugin {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	sandboxed := 0.0
	if os.Geteuid() == 0 {
		sandboxed = 1
	}
	for _, p := range h.Plugins {
		if v, _ := perPlugin("plexporter_plugin_up", p); v != 1 {
			t.Errorf("%s is not up", p)
		}
		if v, ok := perPlugin("plexporter_plugin_sandboxed", p); !ok || v != sandboxed {
			t.Errorf("%s: plexporter_plugin_sandboxed = %v, want %v", p, v, sandboxed)
		}
	}
	if errs := mfs["plexporter_plugin_collect_errors_total"]; errs != nil {
		t.Errorf("the demo's plugins report errors: %v", errs.GetMetric())
	}
	// A family from each source the demo has data for.
	for _, family := range []string{
		"rdma_port_rcv_data_total", "rdma_port_info", "rdma_np_cnp_sent_total", // rdma: sysfs
		"rdma_cc_rx_ce_pkts_total", "rdma_optional_counter_enabled", "rdma_qp_rx_write_requests_total", // rdma: netlink
		"rdma_roce_pfc_pause_frames_total", "rdma_pcie_outbound_stalled_percent", "rdma_phy_rx_corrected_bits_total", // ethtool: ioctl
		"rdma_netdev_global_pause_frames_total", "rdma_netdev_global_pause_duration_total", "rdma_netdev_global_pause_transitions_total", // ethtool: the 802.3x port
		"ethtool_driver_stat_total",
		"nfs_rpc_count_total", "nfs_xprt_tcp_state", "nfs_server_connections", // nfs: mountstats, tcp
		"nvme_info", "nvme_temperature_celsius", "nvme_percentage_used", // nvme: sysfs, SMART
		"slurm_job_info", "textfile_mtime_seconds", // textfile: the demo directory
	} {
		if len(mfs[family].GetMetric()) == 0 {
			t.Errorf("the demo serves no %s", family)
		}
	}
	// make demo says it serves every plugin's real series: each plugin has
	// a family of data (not its health or error counters) with a sample
	// that is not 0.
	for _, p := range h.Plugins {
		families, ok := dataFamilies[p]
		if !ok {
			t.Errorf("plugin %s has no entry in dataFamilies: name the families of its data the demo must show", p)
			continue
		}
		if !anyNonZero(mfs, families) {
			t.Errorf("the demo shows no real series of %s: none of %v has a sample other than 0", p, families)
		}
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", body)
	}
}

// dataFamilies are, per plugin, families of the data it reads from the
// demo node: not plexporter_*, not *_collection_errors_total, not a
// scrape-success or up gauge.
var dataFamilies = map[string][]string{
	"attribution": {"device_job_info"},
	"ebpf":        {"ebpf_watched_addresses", "ebpf_tcp_destinations"},
	"ethtool":     {"rdma_roce_pfc_pause_frames_total", "ethtool_driver_stat_total"},
	"guest":       {"cpus_online", "disk_read_bytes_total"},
	"ernic":       {"ernic_commands_total", "ernic_ip_bytes_total"},
	"nfs":         {"nfs_rpc_count_total"},
	"nixl":        {"agent_tx_bytes_total", "agent_rx_bytes_total"},
	"nvme":        {"nvme_temperature_celsius"},
	"probe":       {"probe_success"},
	"rdma":        {"rdma_port_rcv_data_total"},
	"so":          {"loadavg_load1", "loadavg_tasks"},
	"textfile":    {"slurm_job_info", "backup_last_success_timestamp_seconds"},
}

// anyNonZero reports whether one of the families has a sample (a counter,
// gauge or untyped value, or a histogram's count) other than 0.
func anyNonZero(mfs map[string]*dto.MetricFamily, families []string) bool {
	for _, f := range families {
		for _, m := range mfs[f].GetMetric() {
			for _, v := range []float64{m.GetCounter().GetValue(), m.GetGauge().GetValue(), m.GetUntyped().GetValue(), float64(m.GetHistogram().GetSampleCount())} {
				if v != 0 {
					return true
				}
			}
		}
	}
	return false
}

// go run ./internal/dev/demo lays the node out and writes the host's flags.
func TestRunWritesTreeConfigAndFlags(t *testing.T) {
	dir := t.TempDir()
	for range 2 { // a second run replaces the node
		if err := run(dir, "../../..", ""); err != nil {
			t.Fatal(err)
		}
	}
	flags, err := os.ReadFile(filepath.Join(dir, "flags"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--path.sysfs=" + filepath.Join(dir, "node", "sys"), "--path.procfs=" + filepath.Join(dir, "node", "proc"), "--config.file=" + filepath.Join(dir, "plexporter.yml")} {
		if !strings.Contains(string(flags), want) {
			t.Errorf("flags %q lack %q", flags, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node", "sys", "class", "infiniband")); err != nil {
		t.Error(err)
	}
}

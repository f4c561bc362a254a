package main

import (
	"path"
	"regexp"
	"slices"
	"testing"

	"github.com/plexporter/plexporter/internal/testkit/dashboardtest"
)

// The dashboard's test is deploy/grafana's (internal/testkit/dashboardtest): the
// model is well formed for Grafana, every family a query reads is one the
// plugin exports, and (e2e_linux_test.go) every query answers on a real
// Prometheus scraping the plugin over the shared run directory.

const dashboardFile = "dashboards/ernic.json"

var familyName = regexp.MustCompile(`\b(?:ernic|ionic)_[a-z0-9_]+\b`)

func TestDashboardIsWellFormed(t *testing.T) {
	d := dashboardtest.Load(t, dashboardFile)
	if d.UID == "" || d.Title == "" {
		t.Error("no uid or title")
	}
	qs := dashboardtest.PanelQueries(t, dashboardFile, d)
	vqs, _ := dashboardtest.VariableQueries(t, dashboardFile, d)
	// ernic-exporter's dashboard, rows 1-5 (its sixth row reads a
	// node_exporter inside each VM, not ernic-exporter), and a row of the
	// LIF counters, which that dashboard does not show.
	var rows []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
		}
	}
	if want := []string{"Cluster overview", "Network traffic", "RDMA detail", "Device health", "VM lifecycle", "LIF"}; !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
	// Every family read is one the plugin exports, and every family the
	// original's rows read (all but the per-QP doorbell/CQE and
	// collection-error families) and the LIF counters appear.
	read := map[string]bool{}
	for _, q := range append(qs, vqs...) {
		for _, name := range familyName.FindAllString(q.Expr, -1) {
			if name == lID {
				continue // the label, not a family
			}
			read[name] = true
			if !declared(name) {
				t.Errorf("%s reads %s, which the plugin does not export", q.Where, name)
			}
		}
	}
	for _, want := range []string{"ernic_instances", "ernic_vms", "ernic_instance_up", "ernic_instance_uptime_seconds", "ernic_vm_attached",
		"ernic_vm_uptime_seconds", "ernic_vm_gpu_passthrough", "ernic_ip_bytes_tx_total", "ernic_ip_bytes_rx_total", "ernic_ip_bytes_total",
		"ernic_rdma_bytes_sent_total", "ernic_rdma_bytes_received_total", "ernic_rdma_bytes_read_total", "ernic_rdma_bytes_write_total",
		"ernic_rdma_bytes_total", "ernic_flr_reset_total", "ernic_commands_total", "ernic_interrupts_total", "ernic_mmio_reads_total",
		"ernic_mmio_writes_total", "ernic_stats_writes_total", "ernic_connection_up", "ernic_qp_count", "ernic_qp_bytes_sent_total",
		"ernic_qp_bytes_received_total", "ernic_qp_bytes_rdma_read_total", "ernic_qp_bytes_rdma_write_total", "ernic_qp_wqes_processed_total",
		"ernic_lif_counter_total"} {
		if !read[want] {
			t.Errorf("no panel reads %s", want)
		}
	}
}

// declared reports whether the catalogue has the family, by name or pattern.
func declared(name string) bool {
	for _, d := range catalogue {
		if ok, _ := path.Match(d.Name, name); ok {
			return true
		}
	}
	return false
}

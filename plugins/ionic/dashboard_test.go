package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The dashboard's test follows deploy/grafana's: the model is well formed
// for Grafana (unique panel ids, the ${datasource} variable on every panel,
// a refId per target, every variable used defined, label_values
// variables), every family a query reads is one the plugin exports, and
// (e2e_linux_test.go) every query answers on a real Prometheus scraping the
// plugin over the shared run directory.

const dashboardFile = "dashboards/ernic.json"

type dashboard struct {
	UID, Title string
	Panels     []panel
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
		}
	}
}

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *struct{ Type, UID string }
	Targets    []struct{ Expr, RefID string }
}

type query struct{ where, expr string }

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// panelQueries lists every panel target, checking what Grafana needs.
func panelQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	var out []query
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			out = append(out, query{fmt.Sprintf("panel %q, query %s", p.Title, tg.RefID), tg.Expr})
		}
	}
	return out
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// variableQueries returns each query variable's expression and label.
func variableQueries(t *testing.T, d dashboard) (qs []query, labels []string) {
	t.Helper()
	names := map[string]bool{}
	for _, v := range d.Templating.List {
		names[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q string
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(<expr>, <label>)", v.Name, q)
			continue
		}
		qs = append(qs, query{"variable " + v.Name, m[1]})
		labels = append(labels, m[2])
	}
	if !names["datasource"] {
		t.Error("no datasource variable")
	}
	for _, q := range append(panelQueries(t, d), qs...) {
		for _, m := range regexp.MustCompile(`\$\{?([a-z_]+)`).FindAllStringSubmatch(q.expr, -1) {
			if !names[m[1]] && !strings.HasPrefix(m[1], "__") {
				t.Errorf("%s uses $%s, which the dashboard does not define", q.where, m[1])
			}
		}
	}
	return qs, labels
}

// substitute replaces the variables as Grafana does with "All" selected,
// and the range variables with a window of several 1 s scrapes.
func substitute(expr string) string {
	return regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range)\}?`).ReplaceAllString(
		regexp.MustCompile(`\$\{?([a-z_]+)\}?`).ReplaceAllStringFunc(expr, func(v string) string {
			if strings.Contains(v, "__") {
				return v
			}
			return ".*"
		}), "30s")
}

var familyName = regexp.MustCompile(`\b(?:ernic|ionic)_[a-z0-9_]+\b`)

func TestDashboardIsWellFormed(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("no uid or title")
	}
	qs := panelQueries(t, d)
	vqs, _ := variableQueries(t, d)
	// ernic-exporter's dashboard, rows 1-5 (its sixth row reads a
	// node_exporter inside each VM, not ernic-exporter).
	var rows []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
		}
	}
	if want := []string{"Cluster overview", "Network traffic", "RDMA detail", "Device health", "VM lifecycle"}; !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
	// Every family read is one the plugin exports, and every family the
	// original's rows read (all but the LIF, per-QP doorbell/CQE and
	// collection-error families) appears.
	read := map[string]bool{}
	for _, q := range append(qs, vqs...) {
		for _, name := range familyName.FindAllString(q.expr, -1) {
			if name == lID {
				continue // the label, not a family
			}
			read[name] = true
			if !declared(name) {
				t.Errorf("%s reads %s, which the plugin does not export", q.where, name)
			}
		}
	}
	for _, want := range []string{"ernic_instances", "ernic_vms", "ernic_instance_up", "ernic_instance_uptime_seconds", "ernic_vm_attached",
		"ernic_vm_uptime_seconds", "ernic_vm_gpu_passthrough", "ernic_ip_bytes_tx_total", "ernic_ip_bytes_rx_total", "ernic_ip_bytes_total",
		"ernic_rdma_bytes_sent_total", "ernic_rdma_bytes_received_total", "ernic_rdma_bytes_read_total", "ernic_rdma_bytes_write_total",
		"ernic_rdma_bytes_total", "ernic_flr_reset_total", "ernic_commands_total", "ernic_interrupts_total", "ernic_mmio_reads_total",
		"ernic_mmio_writes_total", "ernic_stats_writes_total", "ernic_connection_up", "ernic_qp_count", "ernic_qp_bytes_sent_total",
		"ernic_qp_bytes_received_total", "ernic_qp_bytes_rdma_read_total", "ernic_qp_bytes_rdma_write_total", "ernic_qp_wqes_processed_total"} {
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

func TestSubstitute(t *testing.T) {
	got := substitute(`rate(x{job=~"$job", ernic_id=~"${ernic}"}[$__rate_interval])`)
	if want := `rate(x{job=~".*", ernic_id=~".*"}[30s])`; got != want {
		t.Errorf("substitute = %s, want %s", got, want)
	}
}

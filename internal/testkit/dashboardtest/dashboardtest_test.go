package dashboardtest

import (
	"encoding/json"
	"testing"
)

func TestSubstitute(t *testing.T) {
	for expr, want := range map[string]string{
		`rate(x{job=~"$job", device=~"${device}"}[$__rate_interval]) / 1e6`: `rate(x{job=~".*", device=~".*"}[30s]) / 1e6`,
		`rate(x{job=~"$job", ernic_id=~"${ernic}"}[$__rate_interval])`:      `rate(x{job=~".*", ernic_id=~".*"}[30s])`,
	} {
		if got := Substitute(expr); got != want {
			t.Errorf("Substitute(%s) = %s, want %s", expr, got, want)
		}
	}
}

// recorder is a testing.TB that keeps the errors the checks report.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func TestChecksFindWhatGrafanaCannotShow(t *testing.T) {
	var d Dashboard
	if err := json.Unmarshal([]byte(`{
	  "uid": "x", "title": "x",
	  "panels": [
	    {"id": 1, "type": "row", "panels": [
	      {"id": 2, "type": "timeseries", "title": "nested, no datasource", "targets": [{"expr": "up", "refId": "A"}]}]},
	    {"id": 2, "type": "timeseries", "title": "id reused", "datasource": {"uid": "${datasource}"},
	     "targets": [{"expr": "up{job=~\"$undefined\"}", "refId": "A"}, {"expr": "up", "refId": "A"}]}],
	  "templating": {"list": [{"name": "instance", "type": "query", "query": {"query": "label_values(up, instance)"}}]}
	}`), &d); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	if qs := PanelQueries(r, "x.json", d); len(qs) != 3 {
		t.Errorf("%d panel queries, want 3 (the nested row's included)", len(qs))
	}
	// The nested panel's datasource, the reused id, the repeated refId.
	if r.errors != 3 {
		t.Errorf("PanelQueries reported %d problems, want 3", r.errors)
	}
	r.errors = 0
	qs, labels := VariableQueries(r, "x.json", d)
	if len(qs) != 1 || qs[0].Expr != "up" || labels[0] != "instance" {
		t.Errorf("variable queries %v, labels %v", qs, labels)
	}
	// PanelQueries' 3 again, no datasource variable, $undefined.
	if r.errors != 5 {
		t.Errorf("VariableQueries reported %d problems, want 5", r.errors)
	}
}

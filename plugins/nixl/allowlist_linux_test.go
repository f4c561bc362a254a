package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// The host's allowlist (--metrics.enabled, PLEXPORTER_ENABLED_METRICS)
// means what NIXL_TELEMETRY_ENABLED_METRICS means: a pattern names events,
// and an event selects every family derived from it (counter, gauge and,
// for the transfer times, the histogram). NIXL's own documented examples
// work. What is checked is what the host serves (the guard applies the
// host's filter with the catalogue's selected_by), not only what the SDK
// lets the plugin write.
func TestAllowlistSelectsEventsNIXLStyle(t *testing.T) {
	for _, c := range []struct {
		enabled  []string
		families []string // every agent_* family served
		statuses []string // the status series of agent_errors_total
	}{
		{ // NIXL's README example (src/plugins/telemetry/prometheus)
			enabled:  []string{"agent_tx_bytes,agent_rx_bytes,agent_err_*"},
			families: []string{"agent_errors_total", "agent_rx_bytes_total", "agent_rx_last_bytes", "agent_tx_bytes_total", "agent_tx_last_bytes"},
			statuses: errorStatuses[:],
		},
		{ // docs/telemetry.md: the transfer-time event selects its histogram too
			enabled:  []string{"agent_xfer_time"},
			families: []string{"agent_xfer_time", "agent_xfer_time_total", "agent_xfer_time_us"},
		},
		{
			enabled:  []string{"agent_memory_*"},
			families: []string{"agent_memory_deregistered_last_bytes", "agent_memory_deregistered_total", "agent_memory_registered_last_bytes", "agent_memory_registered_total"},
		},
		{ // one error event: its status only
			enabled:  []string{"agent_err_backend"},
			families: []string{"agent_errors_total"},
			statuses: []string{"backend"},
		},
		{ // a family name still selects that family alone
			enabled:  []string{"agent_tx_last_bytes", "agent_errors"},
			families: []string{"agent_errors_total", "agent_tx_last_bytes"},
			statuses: errorStatuses[:],
		},
	} {
		t.Run(strings.Join(c.enabled, " "), func(t *testing.T) {
			dir := copyFixture(t)
			res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: fixtureConfig(dir), EnabledMetrics: c.enabled})
			if res.Status != nil {
				t.Fatal(res.Status)
			}
			var families, statuses []string
			for _, mf := range res.Families(t) {
				if !strings.HasPrefix(mf.GetName(), "agent_") || len(mf.GetMetric()) == 0 {
					continue
				}
				families = append(families, mf.GetName())
				if mf.GetName() != "agent_errors_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "status" && !slices.Contains(statuses, l.GetValue()) {
							statuses = append(statuses, l.GetValue())
						}
					}
				}
			}
			slices.Sort(families)
			if !slices.Equal(families, c.families) {
				t.Errorf("--metrics.enabled=%s serves %v, want %v", strings.Join(c.enabled, ","), families, c.families)
			}
			want := slices.Clone(c.statuses)
			slices.Sort(want)
			slices.Sort(statuses)
			if !slices.Equal(statuses, want) {
				t.Errorf("--metrics.enabled=%s serves agent_errors_total for statuses %v, want %v", strings.Join(c.enabled, ","), statuses, want)
			}
		})
	}
}

// A denylist entry naming one error event removes that status alone; one
// naming an event removes all its families.
func TestDenylistNamesEvents(t *testing.T) {
	dir := copyFixture(t)
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: fixtureConfig(dir), DisabledMetrics: []string{"agent_err_backend", "agent_xfer_time"}})
	text := collectText(t, res)
	for _, gone := range []string{`status="backend"`, "agent_xfer_time_total{", "agent_xfer_time{", "agent_xfer_time_us_bucket{"} {
		if strings.Contains(text, gone) {
			t.Errorf("denied, but served: %s", gone)
		}
	}
	for _, kept := range []string{`status="not_posted"`, "agent_xfer_post_time_total{", "agent_tx_bytes_total{"} {
		if !strings.Contains(text, kept) {
			t.Errorf("not denied, but missing: %s", kept)
		}
	}
}

package main

// Restart policy as an operator sees it: an isolated crash costs about a
// second, every time, and the host says when a plugin in backoff is due.

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Three crashes in a row (each as soon as the plugin is back): every one
// costs less than 2 s, and while the plugin is down the host exports when
// it is started again.
func TestIsolatedCrashesCostLessThanTwoSeconds(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "victim.pid")
	h := startHost(t, []string{"other", "victim"}, fmt.Sprintf(`
  other: {config: {series: 1}}
  victim: {config: {series: 1, pid_file: %q}}
`, pidFile))
	for i := range 3 {
		pid, _ := readPIDs(t, pidFile)
		syscall.Kill(pid, syscall.SIGKILL)
		killed := time.Now()
		var down map[string]*dto.MetricFamily
		h.waitFor(2*time.Second, "the crash seen", func() bool {
			_, down = h.scrape("?exclude[]=victim")
			return value(down, "plexporter_plugin_up", "plugin", "victim") == 0
		})
		next := value(down, "plexporter_plugin_next_start_timestamp_seconds", "plugin", "victim")
		if due := time.Unix(0, int64(next*1e9)); next <= 0 || due.Before(killed) || due.After(killed.Add(1500*time.Millisecond)) {
			t.Errorf("crash %d: next start exported as %v (%v after the kill)", i+1, next, due.Sub(killed))
		}
		h.waitFor(5*time.Second, "victim back", func() bool {
			_, mfs := h.scrape("?exclude[]=victim")
			return value(mfs, "plexporter_plugin_up", "plugin", "victim") == 1 && value(mfs, "plexporter_plugin_restarts_total", "plugin", "victim") == float64(i+1)
		})
		back := time.Since(killed)
		t.Logf("crash %d: back after %v", i+1, back)
		if back > 2*time.Second {
			t.Errorf("crash %d: the plugin was back after %v; an isolated crash must cost less than 2 s", i+1, back)
		}
		_, mfs := h.scrape("")
		if n := count(mfs, "plexporter_plugin_next_start_timestamp_seconds", "plugin", "victim"); n != 0 {
			t.Errorf("crash %d: a running plugin exports a next start", i+1)
		}
	}
}

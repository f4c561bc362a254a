package main

// Restart policy as an operator sees it: an isolated crash costs about a
// second, every time, and the host says when a plugin in backoff is due.

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Three crashes in a row (each as soon as the plugin is back): every one
// costs the isolated crash's 1 s back-off (the host's log says so, and
// that it is no crash loop), and while the plugin is down the host exports
// when it is started again. The cost is counted from the host's own
// record, not timed by the test: on a loaded machine the test's clock
// measures the machine, not the restart policy.
func TestIsolatedCrashesCostLessThanTwoSeconds(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "victim.pid")
	h := startHost(t, []string{"other", "victim"}, fmt.Sprintf(`
  other: {config: {series: 1}}
  victim: {config: {series: 1, pid_file: %q}}
`, pidFile))
	sawDown := 0
	for i := range 3 {
		pid, _ := readPIDs(t, pidFile)
		os.Remove(pidFile) // the restarted instance writes a new one
		syscall.Kill(pid, syscall.SIGKILL)
		killed := time.Now()
		if h.waitForRestart("victim", i+1, func(down map[string]*dto.MetricFamily, scraped time.Time) {
			// The host saw the exit after the kill and before this scrape,
			// and schedules the start one back-off (1 s) after it.
			next := value(down, "plexporter_plugin_next_start_timestamp_seconds", "plugin", "victim")
			due := time.Unix(0, int64(next*1e9))
			if next <= 0 || due.Before(killed.Add(time.Second-10*time.Millisecond)) || due.After(scraped.Add(time.Second+10*time.Millisecond)) {
				t.Errorf("crash %d: next start exported as %v (%v after the kill, %v after the scrape that saw it down); want 1 s after the host saw the crash", i+1, next, due.Sub(killed), due.Sub(scraped))
			}
		}) {
			sawDown++
		}
		isolated := linesWith(h.logs.String(), `msg="plugin down; restarting" plugin=victim`, "backoff=1s")
		if len(isolated) != i+1 || len(linesWith(h.logs.String(), "crash loop", "plugin=victim")) != 0 {
			t.Errorf("crash %d: %d isolated crashes with a 1 s back-off logged, want %d and no crash loop:\n%s", i+1, len(isolated), i+1, h.logs.String())
		}
		_, mfs := h.scrape("")
		if n := count(mfs, "plexporter_plugin_next_start_timestamp_seconds", "plugin", "victim"); n != 0 {
			t.Errorf("crash %d: a running plugin exports a next start", i+1)
		}
	}
	// Each down state lasts the 1 s back-off; a machine slow enough that no
	// poll landed in any of them leaves the next start unchecked, not failed.
	t.Logf("the down state was seen after %d of 3 crashes", sawDown)
}

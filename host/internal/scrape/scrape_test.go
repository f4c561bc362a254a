package scrape

// These tests run the chaos test plugin as real processes under a real
// fleet, so the race detector sees rounds, waits and shared merges as they
// run in the host.

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/host/internal/expose"
	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

var chaosBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scrape-test")
	if err != nil {
		panic(err)
	}
	chaosBin = filepath.Join(dir, "chaos")
	cmd := exec.Command("go", "build", "-o", chaosBin, "../../../internal/testplugins/chaos")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		panic("build the chaos plugin: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scraper runs the chaos plugin under each name, configured by pluginsYAML
// (the plugins: section of a config file), and returns a Scraper of them.
func scraper(t testing.TB, pluginsYAML string, names ...string) *Scraper {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.Symlink(chaosBin, filepath.Join(dir, "plexporter-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "plexporter.yml")
	if err := os.WriteFile(cfg, []byte("plugins:\n"+pluginsYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	fl := fleet.New(fleet.Options{Dirs: []string{dir}, ConfigFile: cfg, Defaults: supervise.Settings{Timeout: 5 * time.Second, MaxSeries: 1000}}, log)
	if err := fl.Reconcile(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.StopAll)
	deadline := time.Now().Add(10 * time.Second)
	for !fl.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("plugins not started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	filter, err := metricfilter.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(fl, filter, nil, 4096, log)
}

// scraped is one scrape's output, parsed, and how long it took.
type scraped struct {
	mfs  map[string]*dto.MetricFamily
	took time.Duration
}

// scrape scrapes everything, waiting at most timeout (0: no deadline).
func (s *Scraper) scrapeFor(t *testing.T, timeout time.Duration) scraped {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	start := time.Now()
	fams := s.Scrape(ctx, Selection{})
	took := time.Since(start)
	var buf bytes.Buffer
	if err := expose.Write(&buf, expfmt.NewFormat(expfmt.TypeTextPlain), fams); err != nil {
		t.Error(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Error(err)
	}
	return scraped{mfs, took}
}

// value is the value of family's series whose plugin label is plugin, or -1.
func (r scraped) value(family, plugin string) float64 {
	for _, m := range r.mfs[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "plugin" && l.GetValue() == plugin {
				switch {
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// Scrapes with and without a deadline overlap on a slow plugin: each leaves
// by its own deadline, with what had answered by then, and reports what it
// waited; the fast plugin is asked once for the first round.
func TestEveryScrapeLeavesByItsOwnDeadline(t *testing.T) {
	s := scraper(t, `
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: 800ms}}
`, "fast", "slow")
	const hurry = 200 * time.Millisecond
	var wg sync.WaitGroup
	results := make([]scraped, 8)
	for i := range results {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 20 * time.Millisecond)
			timeout := time.Duration(0)
			if i%2 == 1 {
				timeout = hurry
			}
			results[i] = s.scrapeFor(t, timeout)
		})
	}
	wg.Wait()
	for i, r := range results {
		hurried := i%2 == 1
		waited := r.value("plexporter_plugin_scrape_duration_seconds", "slow")
		switch {
		// Leaving by its own deadline means well before the slow plugin's
		// 800 ms; the margin is for a loaded 2-core CI machine.
		case hurried && r.took > hurry+400*time.Millisecond:
			t.Errorf("scrape %d with a %v deadline took %v", i, hurry, r.took)
		case hurried && (r.value("plexporter_plugin_scrape_success", "slow") != 0 || r.value("chaos_value", "slow") != -1):
			t.Errorf("scrape %d left before the slow plugin answered but has its series or success", i)
		case !hurried && (r.value("plexporter_plugin_scrape_success", "slow") != 1 || r.value("chaos_value", "slow") != 0):
			t.Errorf("scrape %d without a deadline lacks the slow plugin's series", i)
		case r.value("chaos_value", "fast") != 0 || r.value("plexporter_plugin_scrape_success", "fast") != 1:
			t.Errorf("scrape %d lacks the fast plugin's series", i)
		case waited < 0 || waited > r.took.Seconds():
			t.Errorf("scrape %d took %v but reports %v s for the slow plugin", i, r.took, waited)
		case r.value("chaos_collects_total", "fast") != 1:
			t.Errorf("scrape %d saw the fast plugin's Collect #%v: the overlapping scrapes must share #1", i, r.value("chaos_collects_total", "fast"))
		}
	}
}

// Scrapes that saw every plugin answer share one merge: the guard's drop
// counter moves once for them. One that left early merges without the slow
// plugin and adds nothing.
func TestScrapesThatSawTheSameAnswersShareOneMerge(t *testing.T) {
	s := scraper(t, "  dup: {config: {series: 1, duplicates: 1, sleep: 300ms}}\n", "dup")
	var wg sync.WaitGroup
	results := make([]scraped, 9)
	for i := range results {
		wg.Go(func() {
			timeout := time.Duration(0)
			if i == 0 {
				timeout = 100 * time.Millisecond
			}
			results[i] = s.scrapeFor(t, timeout)
		})
	}
	wg.Wait()
	if v := results[0].value("plexporter_dropped_series_total", "dup"); v > 0 {
		t.Errorf("the scrape that left before the plugin answered counted %v drops", v)
	}
	for i, r := range results[1:] {
		if v := r.value("plexporter_dropped_series_total", "dup"); v != 1 {
			t.Errorf("scrape %d reports %v duplicate drops; the scrapes that saw the same answer share one merge", i+1, v)
		}
	}
	if r := s.scrapeFor(t, 0); r.value("plexporter_dropped_series_total", "dup") != 2 || r.value("chaos_collects_total", "dup") != 2 {
		t.Error("the next scrape must start a new round: a new Collect and merge")
	}
}

// A round that every scrape left takes no new ones: the next scrape asks
// the plugins that answered again (fresh values) and joins the Collect
// still in flight of the one that did not.
func TestALeftRoundIsNotJoined(t *testing.T) {
	s := scraper(t, `
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: 1s}}
`, "fast", "slow")
	first := s.scrapeFor(t, 100*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	second := s.scrapeFor(t, 0)
	if first.value("chaos_collects_total", "fast") != 1 || second.value("chaos_collects_total", "fast") != 2 {
		t.Errorf("the fast plugin's Collects: #%v then #%v, want a fresh one for the second scrape", first.value("chaos_collects_total", "fast"), second.value("chaos_collects_total", "fast"))
	}
	if second.value("chaos_collects_total", "slow") != 1 || second.took > 900*time.Millisecond {
		t.Errorf("the second scrape must join the slow plugin's Collect under way (#%v, took %v)", second.value("chaos_collects_total", "slow"), second.took)
	}
}

// The self-metrics every scrape makes for itself (shared merges aside):
// go test ./host/internal/scrape -run XXX -bench HostFamilies
func BenchmarkHostFamilies(b *testing.B) {
	s := scraper(b, "  one: {config: {series: 1}}\n", "one")
	r := s.join(Selection{})
	got := r.wait(context.Background())
	m := r.merged(got, func(m *sharedMerge) { s.merge(r, got, m) })
	s.leave(r)
	now := time.Now()
	for b.Loop() {
		s.hostFamilies(s.report(r, got, m, now, now))
	}
}

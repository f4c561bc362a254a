package scrape

// These tests run the chaos test plugin as real processes under a real
// fleet, so the race detector sees rounds, waits and shared merges as they
// run in the host.

import (
	"bytes"
	"context"
	"fmt"
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
	cmd := exec.Command("go", "build", "-o", chaosBin, "../../../internal/testkit/testplugins/chaos")
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
	fl := fleet.New(fleet.Options{Dirs: []string{dir}, ConfigFile: cfg, Defaults: supervise.Settings{Timeout: time.Hour, MaxSeries: 1000}}, log)
	if err := fl.Reconcile(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.StopAll)
	deadline := time.Now().Add(time.Minute) // generous: a loaded machine starts processes slowly
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

// hold makes a file that holds the Collects of a plugin configured with
// sleep_while: it, until release removes it. The tests below release a
// slow plugin when what they test has happened, rather than give it a
// sleep that a loaded machine may outlast.
func hold(t *testing.T) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	release = sync.OnceFunc(func() { os.Remove(path) })
	t.Cleanup(release)
	return path, release
}

// waitMembers waits until the round of every plugin has n scrapes in it.
func (s *Scraper) waitMembers(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		r := s.rounds[Selection{}.key()]
		got := 0
		if r != nil {
			got = r.members
		}
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d scrapes in the round, want %d", got, n)
		}
	}
}

// within runs fn, failing the test if it has not returned after a minute
// (what it waits for would otherwise never come).
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not done after a minute", what)
	}
}

// Scrapes with and without a deadline overlap on a slow plugin: each leaves
// by its own deadline, with what had answered by then, and reports what it
// waited; the fast plugin is asked once for the first round. The slow
// plugin answers only when the test releases it, after every scrape with a
// deadline has left: a scrape that waited for it would never return.
func TestEveryScrapeLeavesByItsOwnDeadline(t *testing.T) {
	held, release := hold(t)
	s := scraper(t, fmt.Sprintf(`
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: 1h, sleep_while: %q}}
`, held), "fast", "slow")
	const hurry = 200 * time.Millisecond
	var patient, hurried sync.WaitGroup
	results := make([]scraped, 8)
	// The scrapes without a deadline first, all in one round...
	for i := 0; i < len(results); i += 2 {
		patient.Go(func() { results[i] = s.scrapeFor(t, 0) })
	}
	s.waitMembers(t, len(results)/2)
	// ...then those with one join it, and leave while the slow plugin is
	// held.
	for i := 1; i < len(results); i += 2 {
		hurried.Go(func() { results[i] = s.scrapeFor(t, hurry) })
	}
	within(t, "the scrapes with a deadline", hurried.Wait)
	release()
	within(t, "the scrapes without a deadline once the slow plugin answered", patient.Wait)
	for i, r := range results {
		hurried := i%2 == 1
		waited := r.value("plexporter_plugin_scrape_duration_seconds", "slow")
		switch {
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
	held, release := hold(t)
	s := scraper(t, fmt.Sprintf("  dup: {config: {series: 1, duplicates: 1, sleep: 1h, sleep_while: %q}}\n", held), "dup")
	var patient sync.WaitGroup
	results := make([]scraped, 9)
	for i := 1; i < len(results); i++ {
		patient.Go(func() { results[i] = s.scrapeFor(t, 0) })
	}
	s.waitMembers(t, len(results)-1)
	within(t, "the scrape with a deadline", func() { results[0] = s.scrapeFor(t, 100*time.Millisecond) })
	release()
	within(t, "the scrapes without a deadline once the plugin answered", patient.Wait)
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
// still in flight of the one that did not (the slow plugin's #1, not a
// new Collect: it is held until the second scrape is in its round).
func TestALeftRoundIsNotJoined(t *testing.T) {
	held, release := hold(t)
	s := scraper(t, fmt.Sprintf(`
  fast: {config: {series: 1}}
  slow: {config: {series: 1, sleep: 1h, sleep_while: %q}}
`, held), "fast", "slow")
	first := s.scrapeFor(t, 100*time.Millisecond)
	var second scraped
	var wg sync.WaitGroup
	wg.Go(func() { second = s.scrapeFor(t, 0) })
	s.waitMembers(t, 1)
	release()
	within(t, "the second scrape once the slow plugin answered", wg.Wait)
	if first.value("chaos_collects_total", "fast") != 1 || second.value("chaos_collects_total", "fast") != 2 {
		t.Errorf("the fast plugin's Collects: #%v then #%v, want a fresh one for the second scrape", first.value("chaos_collects_total", "fast"), second.value("chaos_collects_total", "fast"))
	}
	if second.value("chaos_collects_total", "slow") != 1 || second.value("plexporter_plugin_scrape_success", "slow") != 1 {
		t.Errorf("the second scrape must join the slow plugin's Collect under way (#%v, success %v)", second.value("chaos_collects_total", "slow"), second.value("plexporter_plugin_scrape_success", "slow"))
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

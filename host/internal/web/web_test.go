package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/scrape"
	"github.com/plexporter/plexporter/internal/guard"
)

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                      false,
		"gzip":                  true,
		"deflate, gzip;q=0.5":   true,
		"gzip;q=0":              false,
		"gzip; q=0.0, identity": false,
		"GZIP":                  true,
		"br, identity":          false,
	} {
		r, _ := http.NewRequest("GET", "/metrics", nil)
		r.Header.Set("Accept-Encoding", header)
		if got := acceptsGzip(r); got != want {
			t.Errorf("Accept-Encoding %q: gzip = %v, want %v", header, got, want)
		}
	}
}

func TestScrapeContextFollowsPrometheusTimeout(t *testing.T) {
	r, _ := http.NewRequest("GET", "/metrics", nil)
	ctx, cancel := scrapeContext(r, DefaultMaxScrapeTimeout)
	if _, ok := ctx.Deadline(); ok {
		t.Error("no header must mean no deadline")
	}
	cancel()
	// A client's hour is cut to the cap (2 minutes by default), less the margin.
	for header, want := range map[string]time.Duration{"10": 9500 * time.Millisecond, "0.6": 500 * time.Millisecond, "junk": 0, "3600": DefaultMaxScrapeTimeout - 500*time.Millisecond, "+Inf": DefaultMaxScrapeTimeout - 500*time.Millisecond, "NaN": 0} {
		r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", header)
		// The deadline is want after a moment between before and after:
		// exact bounds, whatever the machine's speed.
		before := time.Now()
		ctx, cancel := scrapeContext(r, DefaultMaxScrapeTimeout)
		after := time.Now()
		dl, ok := ctx.Deadline()
		cancel()
		if want == 0 {
			if ok {
				t.Errorf("%q: unexpected deadline", header)
			}
			continue
		}
		if !ok || dl.Sub(before) < want || dl.Sub(after) > want {
			t.Errorf("%q: deadline %v after the call began and %v after it returned, want %v", header, dl.Sub(before), dl.Sub(after), want)
		}
	}
}

func TestSelectionSets(t *testing.T) {
	got := set([]string{"rdma,nfs", " nvme ", ""})
	if len(got) != 3 || !got["rdma"] || !got["nfs"] || !got["nvme"] {
		t.Fatalf("set = %v", got)
	}
	if set(nil) != nil {
		t.Fatal("no values must mean no selection")
	}
}

func TestLandingPageLinksOnlyWhatIsServed(t *testing.T) {
	h, err := Handler(nil, func() error { return nil }, Options{MetricsPath: "/metrics"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Fatalf("landing page %d:\n%s", rec.Code, body)
	}
	if strings.Contains(body, "debug/pprof") {
		t.Errorf("landing page links profiling endpoints the host does not serve:\n%s", body)
	}
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/profile"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404 (no profiling served)", path, rec.Code)
		}
	}
}

type fakeScraper struct {
	plugins []string
	got     []scrape.Selection
}

func (f *fakeScraper) Scrape(_ context.Context, sel scrape.Selection) []*guard.Family {
	f.got = append(f.got, sel)
	return nil
}

func (f *fakeScraper) Plugins() []string { return f.plugins }

func TestUnknownPluginInSelectionIs400(t *testing.T) {
	s := &fakeScraper{plugins: []string{"nfs", "rdma"}}
	h, err := Handler(s, func() error { return nil }, Options{MetricsPath: "/metrics"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for query, want := range map[string]string{
		"collect[]=nosuch":                "collect[]=nosuch",
		"exclude[]=nosuch":                "exclude[]=nosuch",
		"collect[]=rdma&exclude[]=nvme,x": "exclude[]=nvme, exclude[]=x",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics?"+query, nil))
		if body := rec.Body.String(); rec.Code != http.StatusBadRequest || !strings.Contains(body, want) || !strings.Contains(body, "known plugins: nfs, rdma") {
			t.Errorf("%s: %d %q; want 400 naming %s and the known plugins", query, rec.Code, body, want)
		}
	}
	if len(s.got) != 0 {
		t.Errorf("a bad selection was scraped: %v", s.got)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics?collect[]=rdma&exclude[]=nfs", nil))
	if rec.Code != 200 || len(s.got) != 1 || !s.got[0].Include["rdma"] || !s.got[0].Exclude["nfs"] {
		t.Errorf("a good selection: %d, scraped %v", rec.Code, s.got)
	}
}

func TestReloadEndpoint(t *testing.T) {
	var calls int
	var fail error
	off, err := Handler(&fakeScraper{}, func() error { return nil }, Options{MetricsPath: "/metrics", Reload: func() error { calls++; return fail }}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	off.ServeHTTP(rec, httptest.NewRequest("POST", "/-/reload", nil))
	if rec.Code != http.StatusForbidden || calls != 0 || !strings.Contains(rec.Body.String(), "--web.enable-lifecycle") {
		t.Errorf("POST without --web.enable-lifecycle: %d %q, %d reloads; want 403 naming the flag and none", rec.Code, rec.Body.String(), calls)
	}
	h, err := Handler(&fakeScraper{}, func() error { return nil }, Options{MetricsPath: "/metrics", EnableLifecycle: true, Reload: func() error { calls++; return fail }}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/-/reload", nil))
		return rec
	}
	if rec := do("GET"); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") == "" || calls != 0 {
		t.Errorf("GET: %d Allow=%q, %d reloads; want 405 and none", rec.Code, rec.Header().Get("Allow"), calls)
	}
	if rec := do("POST"); rec.Code != 200 || calls != 1 {
		t.Errorf("POST: %d, %d reloads", rec.Code, calls)
	}
	fail = errors.New("plexporter.yml:3: unknown key")
	if rec := do("POST"); rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "plexporter.yml:3: unknown key") {
		t.Errorf("failed reload: %d %q; want 500 with the error", rec.Code, rec.Body.String())
	}
}

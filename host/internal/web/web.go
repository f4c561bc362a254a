// Package web serves the host's HTTP endpoints: the metrics path, /healthz,
// /ready and the landing page. TLS, basic auth and systemd sockets come from
// prometheus/exporter-toolkit.
package web

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/plexporter/plexporter/host/internal/expose"
	"github.com/plexporter/plexporter/host/internal/scrape"
)

// Options for the handler.
type Options struct {
	MetricsPath string
	MaxRequests int // concurrent metrics requests; 0 = unlimited
	Version     string
}

// Handler returns the host's HTTP handler.
func Handler(s *scrape.Scraper, ready func() bool, opts Options, log *slog.Logger) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle(opts.MetricsPath, &metricsHandler{scraper: s, log: log, sem: semaphore(opts.MaxRequests)})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "plugins are still starting\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	if opts.MetricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "plexporter",
			Description: "Prometheus exporter for AI/HPC nodes: a host for collector plugins",
			Version:     opts.Version,
			Links: []web.LandingLinks{
				{Address: opts.MetricsPath, Text: "Metrics"},
				{Address: "/healthz", Text: "Liveness"},
				{Address: "/ready", Text: "Readiness"},
			},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

func semaphore(n int) chan struct{} {
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, n)
}

type metricsHandler struct {
	scraper *scrape.Scraper
	log     *slog.Logger
	sem     chan struct{}
}

var gzipPool = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // default level costs 4x the whole pipeline
	return w
}}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.sem != nil {
		select {
		case h.sem <- struct{}{}:
			defer func() { <-h.sem }()
		default:
			http.Error(w, "too many concurrent scrapes (--web.max-requests)", http.StatusServiceUnavailable)
			return
		}
	}
	q := r.URL.Query()
	sel := scrape.Selection{Include: set(q["collect[]"]), Exclude: set(q["exclude[]"])}
	ctx, cancel := scrapeContext(r)
	defer cancel()
	fams := h.scraper.Scrape(ctx, sel)

	format := expfmt.NegotiateAccept(r.Header, expose.Formats...)
	w.Header().Set("Content-Type", string(format))
	var sink io.Writer = w
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		gz := gzipPool.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() {
			gz.Close()
			gzipPool.Put(gz)
		}()
		sink = gz
	}
	if err := expose.Write(sink, format, fams); err != nil {
		// Headers are gone; all we can do is log. Usually the client left.
		h.log.Debug("writing metrics", "err", err)
	}
}

// scrapeTimeoutMargin is kept free of Prometheus's scrape timeout for
// merging, encoding and the network, so a slow plugin costs its own series,
// never the whole scrape.
const scrapeTimeoutMargin = 500 * time.Millisecond

// scrapeContext bounds the scrape by Prometheus's own timeout
// (X-Prometheus-Scrape-Timeout-Seconds) minus a margin; plugins still have
// their own, usually shorter, --scrape.timeout.
func scrapeContext(r *http.Request) (context.Context, context.CancelFunc) {
	secs, err := strconv.ParseFloat(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64)
	if err != nil || secs <= 0 {
		return context.WithCancel(r.Context())
	}
	d := max(time.Duration(secs*float64(time.Second))-scrapeTimeoutMargin, scrapeTimeoutMargin)
	return context.WithTimeout(r.Context(), d)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		if qs, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
			if q, err := strconv.ParseFloat(qs, 64); err == nil && q == 0 {
				return false
			}
		}
		return true
	}
	return false
}

func set(vals []string) map[string]bool {
	if len(vals) == 0 {
		return nil
	}
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				m[name] = true
			}
		}
	}
	return m
}

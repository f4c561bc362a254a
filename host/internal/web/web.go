// Package web serves the host's HTTP endpoints: the metrics path, /healthz,
// /ready and the landing page. TLS, basic auth and systemd sockets come from
// prometheus/exporter-toolkit.
package web

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/plexporter/plexporter/host/internal/expose"
	"github.com/plexporter/plexporter/host/internal/scrape"
	"github.com/plexporter/plexporter/internal/guard"
)

// Options for the handler.
type Options struct {
	MetricsPath string
	MaxRequests int // concurrent metrics requests; 0 = unlimited
	Version     string
	// WriteTimeout bounds how long one response may take to reach the
	// client once the scrape is done (default: DefaultWriteTimeout). A
	// client that stops reading gives its --web.max-requests slot back after
	// it, instead of holding it for as long as it keeps the connection open.
	// Prometheus's own scrape timeout, when it sends one, wins.
	WriteTimeout time.Duration
	// Reload, when set, is served as POST /-/reload: what SIGHUP does,
	// answered 200, or 500 with its error — only with EnableLifecycle
	// (--web.enable-lifecycle); otherwise /-/reload answers 403, as
	// Prometheus's does.
	Reload          func() error
	EnableLifecycle bool
	// MaxScrapeTimeout caps the X-Prometheus-Scrape-Timeout-Seconds a
	// client may announce (default DefaultMaxScrapeTimeout): the header
	// sets how long a scrape may wait and its response may take, so a
	// client announcing an hour held a --web.max-requests slot for one.
	MaxScrapeTimeout time.Duration
}

// DefaultMaxScrapeTimeout is the cap on a client's announced scrape
// timeout when Options leave it unset (Prometheus's own scrape_timeout
// cannot usefully exceed its scrape_interval, rarely above a minute).
const DefaultMaxScrapeTimeout = 2 * time.Minute

// DefaultWriteTimeout is the write budget when Options leave it unset.
const DefaultWriteTimeout = 5 * time.Second

// Scraper is what the metrics handler needs of the scrape package.
type Scraper interface {
	Scrape(ctx context.Context, sel scrape.Selection) []*guard.Family
	// Plugins names every plugin a selection may name (found, whether it
	// runs or not).
	Plugins() []string
}

// Handler returns the host's HTTP handler. ready is nil when the host is
// ready, else why not (/ready answers 503 with it).
func Handler(s Scraper, ready func() error, opts Options, log *slog.Logger) (http.Handler, error) {
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxScrapeTimeout <= 0 {
		opts.MaxScrapeTimeout = DefaultMaxScrapeTimeout
	}
	mux := http.NewServeMux()
	mux.Handle(opts.MetricsPath, &metricsHandler{scraper: s, log: log, sem: semaphore(opts.MaxRequests), writeTimeout: opts.WriteTimeout, maxTimeout: opts.MaxScrapeTimeout})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	if opts.Reload != nil {
		mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
			if !opts.EnableLifecycle {
				// Anyone who reaches the port could otherwise make the host
				// restart changed plugins at will.
				http.Error(w, "Lifecycle API is not enabled (--web.enable-lifecycle); reload with SIGHUP (systemctl reload plexporter)", http.StatusForbidden)
				return
			}
			if r.Method != http.MethodPost && r.Method != http.MethodPut {
				w.Header().Set("Allow", "POST, PUT")
				http.Error(w, "reload with POST", http.StatusMethodNotAllowed)
				return
			}
			if err := opts.Reload(); err != nil {
				http.Error(w, "reload failed; the running plugins keep their settings: "+err.Error(), http.StatusInternalServerError)
				return
			}
			w.Write([]byte("reloaded\n"))
		})
	}
	if opts.MetricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "plexporter",
			Description: "Prometheus exporter for AI/HPC nodes: a host for collector plugins",
			Version:     opts.Version,
			// The toolkit's page links /debug/pprof/ by default; the host
			// serves no profiling endpoints, so the links would be 404s.
			Profiling: "false",
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

// Server returns the HTTP server for handler. Its timeouts keep clients
// from holding resources: headers must arrive within ReadHeaderTimeout, and
// a keep-alive connection that carries no request for IdleTimeout is closed
// (longer than Prometheus's default 1 m interval, so a scraper's connection
// is reused between scrapes). Responses are bounded per request by the
// handler's write deadline, not by http.Server.WriteTimeout: that one starts
// when the headers are read, so it would also have to cover the longest
// scrape a Prometheus may ask for. At most maxConns connections are open
// (0: no limit): see connLimit.
func Server(handler http.Handler, maxConns int) *http.Server {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	if maxConns > 0 {
		l := &connLimit{max: maxConns, conns: map[net.Conn]*connInfo{}}
		srv.ConnState = l.track
	}
	return srv
}

// connLimit caps the open connections (each costs the host a descriptor
// and a goroutine: 3,000 idle keep-alive connections cost 3,019 fds, and
// at a lowered fd limit the host could no longer restart plugins). A new
// connection over the cap closes the connection that has waited longest
// without a request in progress (idle keep-alive, or connected and not yet
// sending): a scraper arriving finds room, and whoever hoards connections
// loses them. When every connection is serving a request, the new one is
// closed instead. It works on whatever listener the server uses
// (systemd's sockets, vsock, TLS).
type connLimit struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connInfo
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

func (l *connLimit) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
		return
	case http.StateNew:
		if len(l.conns) >= l.max {
			var victim net.Conn
			var oldest time.Time
			for vc, info := range l.conns {
				if info.state != http.StateActive && (victim == nil || info.since.Before(oldest)) {
					victim, oldest = vc, info.since
				}
			}
			if victim == nil {
				c.Close() // every connection is serving: refuse this one
				return
			}
			victim.Close()
			delete(l.conns, victim)
		}
	}
	if info := l.conns[c]; info != nil {
		info.state, info.since = st, time.Now()
		return
	}
	l.conns[c] = &connInfo{state: st, since: time.Now()}
}

type metricsHandler struct {
	scraper      Scraper
	log          *slog.Logger
	sem          chan struct{}
	writeTimeout time.Duration
	maxTimeout   time.Duration // cap on the client's announced timeout
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
	// url.ParseQuery, not r.URL.Query: Query drops what it cannot parse
	// (a ';', more parameters than net/url accepts) without a word, and a
	// scrape that silently lost its collect[] would serve every plugin.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		http.Error(w, "bad query: "+err.Error()+" (expected collect[]=<plugin>&exclude[]=<plugin>)", http.StatusBadRequest)
		return
	}
	sel := scrape.Selection{Include: set(q["collect[]"]), Exclude: set(q["exclude[]"])}
	if err := checkSelection(sel, h.scraper.Plugins()); err != nil {
		// As node_exporter does: a typo must not look like an empty plugin.
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := scrapeContext(r, h.maxTimeout)
	defer cancel()
	fams := h.scraper.Scrape(ctx, sel)

	// The scrape is done; from here the client alone decides how long the
	// response takes. Bound it so a client that never reads frees its slot.
	budget := h.writeTimeout
	if d, ok := prometheusTimeout(r, h.maxTimeout); ok && d > budget {
		budget = d
	}
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(budget)); err != nil {
		h.log.Debug("cannot set the write deadline", "err", err)
	}

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
func scrapeContext(r *http.Request, maxTimeout time.Duration) (context.Context, context.CancelFunc) {
	d, ok := prometheusTimeout(r, maxTimeout)
	if !ok {
		return context.WithCancel(r.Context())
	}
	return context.WithTimeout(r.Context(), max(d-scrapeTimeoutMargin, scrapeTimeoutMargin))
}

// prometheusTimeout is the scrape timeout Prometheus announces in
// X-Prometheus-Scrape-Timeout-Seconds, at most maxTimeout.
func prometheusTimeout(r *http.Request, maxTimeout time.Duration) (time.Duration, bool) {
	secs, err := strconv.ParseFloat(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64)
	if err != nil || !(secs > 0) {
		return 0, false
	}
	if secs >= maxTimeout.Seconds() {
		return maxTimeout, true
	}
	return time.Duration(secs * float64(time.Second)), true
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

// checkSelection reports the names of sel that are no plugin the host
// knows, with the ones it knows.
func checkSelection(sel scrape.Selection, known []string) error {
	var unknown []string
	for _, param := range []struct {
		name  string
		names map[string]bool
	}{{"collect[]", sel.Include}, {"exclude[]", sel.Exclude}} {
		for name := range param.names {
			if !slices.Contains(known, name) {
				unknown = append(unknown, fmt.Sprintf("%s=%s", param.name, name))
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	list := strings.Join(known, ", ")
	if list == "" {
		list = "none"
	}
	return fmt.Errorf("unknown plugin in %s (selection is by plugin name); known plugins: %s", strings.Join(unknown, ", "), list)
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

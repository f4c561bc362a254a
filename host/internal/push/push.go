// Package push sends the host's merged, guarded snapshot — what /metrics
// serves — to a receiver on its own interval, independent of scrapes:
// Prometheus remote write 1.0 (the default) or 2.0, or OTLP/HTTP
// (push.protocol). Only the encoding differs (protocols.go).
//
// Each interval one snapshot becomes one batch in a memory ring bounded
// by samples (the oldest batches go first when it is full, counted). One
// sender sends the ring oldest first, one request at a time, so every
// series arrives in time order; client_golang's remote write client
// (OTLP: the pusher's own loop, alike)
// retries 5xx, 429 and network errors with exponential backoff and jitter,
// adding a Retry-After, until the request succeeds, and never retries
// another 4xx (the samples are dropped, counted and logged with the status
// and the start of the body). A series that was in the last snapshot and
// is not in this one gets a staleness marker. A clean shutdown sends what
// is pending, for at most the flush timeout.
//
// Several targets (push: as a list) are one Pusher each, run together by
// RunAll: each its own ring, spool, sender and retries; those of one
// interval take each snapshot from one call of the source.
package push

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/snappy"

	"github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/prompb"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/guard"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Defaults of the push: section's zero values.
const (
	DefaultRemoteTimeout     = 30 * time.Second
	DefaultMaxPendingSamples = 500_000
	DefaultMaxSamplesPerSend = 2000
	DefaultMinBackoff        = 30 * time.Millisecond
	DefaultMaxBackoff        = 5 * time.Second
	DefaultFlushTimeout      = 10 * time.Second
	DefaultSpoolMaxAge       = time.Hour
	DefaultSpoolMaxBytes     = 512 << 20
)

// Source returns the merged snapshot, the families /metrics would serve.
type Source func(ctx context.Context) []*guard.Family

// WithDefaults returns c with every zero setting at its default.
func WithDefaults(c config.Push) config.Push {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Interval, config.DefaultPushInterval)
	def(&c.RemoteTimeout, DefaultRemoteTimeout)
	def(&c.MinBackoff, DefaultMinBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.FlushTimeout, DefaultFlushTimeout)
	if c.MaxPendingSamples <= 0 {
		c.MaxPendingSamples = DefaultMaxPendingSamples
	}
	if c.MaxSamplesPerSend <= 0 {
		c.MaxSamplesPerSend = DefaultMaxSamplesPerSend
	}
	def(&c.SpoolMaxAge, DefaultSpoolMaxAge)
	if c.SpoolMaxBytes <= 0 {
		c.SpoolMaxBytes = DefaultSpoolMaxBytes
	}
	return c
}

// snapshot is one snapshot's samples, all at one timestamp. Without a
// spool: series ids into the table and values, encoded when sent. With a
// spool: encoded at once, in the snapshot's order (an OTLP counter's
// start time is the state of that order), as the bodies of its requests,
// held in memory until they are on disk, then on disk only.
type snapshot struct {
	ts     int64 // milliseconds
	n      int   // samples
	ids    []uint32
	values []float64
	// The native histograms, by sample index (nil: none); the value of
	// such a sample is its count.
	natives map[int]*prompb.Histogram
	done    int // samples sent or rejected already

	frames  []frame   // with a spool: the requests, while not on disk
	next    int       // with a spool: frames sent or rejected already
	file    spoolFile // with spooled, its copy on disk
	spooled bool
}

func (b *snapshot) unsent() int { return b.n - b.done }

// Pusher pushes snapshots. It is also the prometheus.Collector of its
// self-metrics.
type Pusher struct {
	cfg      config.Push
	name     string // remote_name: the target's name
	url      string // the URL without credentials, for labels and logs
	descs    pusherDescs
	src      Source
	log      *slog.Logger
	api      *remote.API  // remote write
	client   *http.Client // OTLP
	status   *statusRecorder
	external []prompb.Label
	resource *resourcepb.Resource // OTLP: of the external labels
	fams     map[famMeta]*famMeta // interned family metadata
	now      func() time.Time

	wake chan struct{}

	mu       sync.Mutex
	tab      *table
	ring     []*snapshot // oldest first; with a spool, the files a previous run left first
	pending  int         // unsent samples in ring
	inFlight bool        // ring[0] is being sent
	// With a spool, the ring's snapshots are on disk: max_pending_samples
	// bounds those held in memory only (not written yet, or not
	// writable).
	spool       *spool
	spoolErrors float64
	last        []uint32 // ids of the last snapshot, held
	memo        flatMemo // what the last snapshot's chunks were, and their series' ids
	mark        []uint32 // by id: the snapshot number that last saw it
	snaps       uint32
	idBuf       []uint32
	valBuf      []float64
	failing     bool
	// With a spool and OTLP: the counters' start times the last run
	// left at its clean shutdown, by series key, taken up when a series
	// is first seen, until spool_max_age after the start.
	priorStarts map[string]counterStart
	priorUntil  time.Time

	sent, failed float64
	dropped      map[string]float64
	lastSuccess  time.Time
}

// Reasons of plexporter_push_dropped_samples_total.
const (
	DropRingFull  = "ring_full"  // the ring was over max_pending_samples: the oldest batch went
	DropRejected  = "rejected"   // the receiver answered 4xx (not 429): never retried
	DropShutdown  = "shutdown"   // still pending when the flush timeout ended
	DropError     = "error"      // the request could not be made (encoding)
	DropTooOld    = "too_old"    // with a spool: older than spool_max_age
	DropSpoolFull = "spool_full" // with a spool: over spool_max_bytes, or the disk full
	// DropOtherProtocol: with a spool, files an earlier run wrote in
	// another protocol (push.protocol changed): they cannot be posted in
	// this one.
	DropOtherProtocol = "other_protocol"
)

// New returns a Pusher for cfg (defaults applied) reading src.
func New(cfg config.Push, src Source, userAgent string, log *slog.Logger) (*Pusher, error) {
	cfg = WithDefaults(cfg)
	if cfg.URL == "" {
		return nil, errors.New("push: no url (push.url in --config.file or --push.url)")
	}
	if cfg.Protocol == "" {
		cfg.Protocol = config.PushRemoteWriteV1
	}
	if err := config.CheckPushProtocol(cfg.Protocol); err != nil {
		return nil, fmt.Errorf("push: protocol: %w", err)
	}
	client, err := promconfig.NewClientFromConfig(cfg.HTTPClientConfig, "plexporter_push", promconfig.WithUserAgent(userAgent))
	if err != nil {
		return nil, fmt.Errorf("push: HTTP client settings: %w", err)
	}
	status := &statusRecorder{next: client.Transport, headers: cfg.Headers}
	client.Transport = status
	client.Timeout = cfg.RemoteTimeout
	name, safeURL := config.PushName(&cfg), RedactURL(cfg.URL)
	p := &Pusher{
		cfg: cfg, name: name, url: safeURL, descs: newDescs(name, safeURL), src: src, log: log.With("remote_name", name), client: client, status: status, now: time.Now,
		wake: make(chan struct{}, 1), tab: newTable(), dropped: map[string]float64{}, fams: map[famMeta]*famMeta{},
	}
	log = p.log
	if cfg.Protocol != config.PushOTLP {
		p.api, err = remote.NewAPI(cfg.URL,
			remote.WithAPIHTTPClient(client),
			remote.WithAPIPath(""), // cfg.URL is the whole endpoint
			remote.WithAPIBackoff(remote.BackoffConfig{Min: cfg.MinBackoff, Max: cfg.MaxBackoff, MaxRetries: 0}), // 0: until it succeeds or shutdown
		)
		if err != nil {
			return nil, fmt.Errorf("push: %s: url %q: %w", name, safeURL, err)
		}
	}
	if cfg.SpoolDir != "" {
		sp, others, err := openSpool(cfg.SpoolDir, cfg.Protocol, cfg.SpoolMaxBytes, cfg.SpoolMaxAge)
		if err != nil {
			return nil, err
		}
		p.spool = sp
		p.dropped[DropTooOld], p.dropped[DropSpoolFull], p.dropped[DropOtherProtocol] = 0, 0, 0
		for _, proto := range slices.Sorted(maps.Keys(others)) {
			samples := 0
			for _, f := range others[proto] {
				samples += f.samples
				os.Remove(filepath.Join(sp.dir, f.name))
			}
			p.dropped[DropOtherProtocol] += float64(samples)
			log.Warn("push: the spool holds snapshots an earlier run wrote in another protocol; they cannot be posted as "+cfg.Protocol+" and are dropped", "dir", cfg.SpoolDir, "files", len(others[proto]), "samples", samples, "protocol", proto)
		}
		// Past the bounds already (the age, or a smaller
		// spool_max_bytes): dropped before the sender can take them.
		cutoff := p.now().Add(-sp.maxAge).UnixMilli()
		for _, f := range slices.Clone(sp.files) {
			reason := ""
			switch {
			case f.ts < cutoff:
				reason = DropTooOld
			case sp.bytes > sp.maxBytes:
				reason = DropSpoolFull
			default:
				p.ring = append(p.ring, &snapshot{ts: f.ts, n: f.samples, file: f, spooled: true})
				p.pending += f.samples
				continue
			}
			p.dropped[reason] += float64(f.samples)
			sp.remove(f)
			log.Warn("push: dropped a spool file of an earlier run", "file", filepath.Join(sp.dir, f.name), "samples", f.samples, "reason", reason)
		}
		if len(sp.files) > 0 {
			log.Info("push: the spool holds snapshots of an earlier run; they are sent first", "dir", cfg.SpoolDir, "files", len(sp.files), "samples", p.pending, "bytes", sp.bytes)
		}
		if cfg.Protocol == config.PushOTLP {
			starts, err := sp.loadStarts()
			if err != nil {
				log.Warn("push: cannot read the counter start times the last run left; counters start anew", "file", filepath.Join(sp.dir, startsFile), "err", err)
			}
			p.priorStarts, p.priorUntil = starts, p.now().Add(sp.maxAge)
		} else {
			os.Remove(filepath.Join(sp.dir, startsFile)) // an OTLP run's
		}
	}
	for n, v := range cfg.ExternalLabels {
		p.external = append(p.external, prompb.Label{Name: n, Value: v})
	}
	slices.SortFunc(p.external, func(x, y prompb.Label) int { return strings.Compare(x.Name, y.Name) })
	p.resource = otlpResource(p.external)
	for _, r := range []string{DropRingFull, DropRejected, DropShutdown, DropError} {
		p.dropped[r] = 0
	}
	return p, nil
}

// Name is the target's name, the remote_name label of its self-metrics.
func (p *Pusher) Name() string { return p.name }

// URL is the target's URL without credentials, the url label of its
// self-metrics.
func (p *Pusher) URL() string { return p.url }

// RedactURL is u without its user information (a password in the URL):
// what labels and logs show. A URL that does not parse is shown as
// "<unparsable URL>" (config checks every URL before).
func RedactURL(u string) string {
	x, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	x.User = nil
	return x.String()
}

// Run pushes a snapshot now and every interval until ctx ends, then sends
// what is pending for at most the flush timeout and counts the rest as
// dropped (reason shutdown).
func (p *Pusher) Run(ctx context.Context) { RunAll(ctx, p) }

// RunAll runs every pusher as Run does, each with its own sender, ring,
// spool and retries: one whose receiver is down or slow never delays
// another's requests. Pushers of one interval share their snapshots: at
// each tick the first one's source is asked once (one scrape round) and
// each of them queues the same families at the same timestamp; pushers of
// different intervals ask apart (the scraper joins rounds that overlap).
// When ctx ends every pusher flushes at once, each within its own flush
// timeout.
func RunAll(ctx context.Context, ps ...*Pusher) {
	groups := map[time.Duration][]*Pusher{}
	var order []time.Duration
	for _, p := range ps {
		if groups[p.cfg.Interval] == nil {
			order = append(order, p.cfg.Interval)
		}
		groups[p.cfg.Interval] = append(groups[p.cfg.Interval], p)
	}
	var wg sync.WaitGroup
	for _, iv := range order {
		wg.Go(func() { runGroup(ctx, iv, groups[iv]) })
	}
	wg.Wait()
}

// runGroup runs pushers of one interval.
func runGroup(ctx context.Context, interval time.Duration, ps []*Pusher) {
	senders := make([]*sender, len(ps))
	for i, p := range ps {
		senders[i] = p.startSender()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if len(ps) == 1 {
			ps[0].Snapshot(ctx)
		} else {
			ts := ps[0].now()
			mfs := ps[0].src(ctx)
			if ctx.Err() == nil {
				// At once: one pusher writing its spool does not hold
				// the others' snapshots back.
				var wg sync.WaitGroup
				for _, p := range ps {
					wg.Go(func() { p.take(ts, mfs) })
				}
				wg.Wait()
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Go(s.finish)
	}
	wg.Wait()
}

// sender is a pusher's running send loop.
type sender struct {
	p          *Pusher
	stopping   chan struct{} // closed: send what is pending, then return
	sent       chan struct{} // closed when the loop has returned
	cancelSend context.CancelFunc
}

func (p *Pusher) startSender() *sender {
	sendCtx, cancelSend := context.WithCancel(context.Background())
	s := &sender{p: p, stopping: make(chan struct{}), sent: make(chan struct{}), cancelSend: cancelSend}
	go func() {
		defer close(s.sent)
		p.sendLoop(sendCtx, s.stopping)
	}()
	return s
}

// finish sends what is pending for at most the flush timeout and counts
// the rest as dropped (reason shutdown), or leaves it in the spool.
func (s *sender) finish() {
	p := s.p
	defer s.cancelSend()
	close(s.stopping)
	flush := time.NewTimer(p.cfg.FlushTimeout)
	defer flush.Stop()
	select {
	case <-s.sent:
	case <-flush.C:
		s.cancelSend()
		<-s.sent
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lost, kept := 0, 0
	for _, b := range p.ring {
		if b.spooled {
			kept += b.unsent()
		} else {
			lost += b.unsent()
		}
		p.tab.release(b.ids)
	}
	p.ring, p.pending = nil, 0
	if p.spool != nil && p.cfg.Protocol == config.PushOTLP {
		p.saveStarts()
	}
	if lost > 0 {
		p.dropped[DropShutdown] += float64(lost)
		p.log.Warn("push: samples still unsent at shutdown were dropped", "samples", lost, "flush_timeout", p.cfg.FlushTimeout)
	}
	if kept > 0 {
		p.log.Info("push: unsent snapshots stay in the spool for the next start", "samples", kept, "dir", p.spool.dir, "files", len(p.spool.files))
	}
}

// Snapshot takes one snapshot from the source and queues it. A snapshot
// cut short by ctx is not queued (it would mark the series of every
// plugin that had not answered stale). Calls must not overlap (Run makes
// them one at a time): the timestamp is read before the source is asked,
// so two at once could queue their samples out of time order.
func (p *Pusher) Snapshot(ctx context.Context) {
	ts := p.now()
	mfs := p.src(ctx)
	if ctx.Err() != nil {
		return
	}
	p.take(ts, mfs)
}

// take queues mfs, a snapshot taken at ts. The families are only read:
// pushers of one interval take the same ones.
func (p *Pusher) take(ts time.Time, mfs []*guard.Family) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snaps++
	b := &snapshot{ts: ts.UnixMilli(), ids: p.idBuf[:0], values: p.valBuf[:0]}
	pos := 0
	flattenInfo(mfs, p.external, p.intern, &p.memo, func(key []byte, lb *labelBuilder, v float64, in seriesInfo) {
		// Snapshots come in the same order, push after push: a series
		// of a chunk unchanged since the last snapshot is known without
		// its key (flatMemo); else the series at this place last time is
		// the first guess, cheaper than a lookup among every series held.
		var id uint32
		if lb.prev >= 0 {
			id = p.memo.id(lb.prev)
			p.tab.hold(id)
		} else if pos < len(p.last) && p.tab.keys[p.last[pos]] == string(key) {
			id = p.last[pos]
			p.tab.hold(id)
		} else {
			id = p.tab.ref(key, lb.labels())
		}
		pos++
		p.memo.note(id)
		if int(id) >= len(p.mark) {
			p.mark = append(p.mark, make([]uint32, int(id)+1-len(p.mark))...)
		}
		if p.mark[id] == p.snaps { // the same series twice: keep the first
			p.tab.release([]uint32{id})
			return
		}
		p.mark[id] = p.snaps
		p.tab.setInfo(id, in)
		if p.priorStarts != nil && p.tab.start[id] == 0 && in.fam != nil &&
			(in.role == roleCount || in.role == roleNative || (in.role == roleValue && in.fam.typ == pluginv1.MetricType_METRIC_TYPE_COUNTER)) {
			if st, ok := p.priorStarts[p.tab.keys[id]]; ok {
				// The series as the last run left it: its start holds
				// while its value does not decrease (startOf).
				p.tab.start[id], p.tab.prev[id] = st.start, st.prev
				delete(p.priorStarts, p.tab.keys[id])
			}
		}
		if in.role == roleNative {
			if b.natives == nil {
				b.natives = map[int]*prompb.Histogram{}
			}
			b.natives[len(b.ids)] = histOf(lb.nat, lb.natCount, lb.natSum, b.ts)
		}
		b.ids, b.values = append(b.ids, id), append(b.values, v)
	})
	if p.priorStarts != nil && (len(p.priorStarts) == 0 || ts.After(p.priorUntil)) {
		p.priorStarts = nil
	}
	p.enqueue(b)
	if p.spool != nil && b.n > 0 {
		p.spoolSnapshot(b)
	}
}

// intern returns f's metadata, one copy per family. p.mu is held.
func (p *Pusher) intern(f *guard.Family) *famMeta {
	k := famMeta{name: f.Name, help: f.Help, unit: f.Unit, typ: f.Type}
	if m, ok := p.fams[k]; ok {
		return m
	}
	// Copies: the strings may point into a plugin's batch.
	m := &famMeta{name: strings.Clone(f.Name), help: strings.Clone(f.Help), unit: strings.Clone(f.Unit), typ: f.Type}
	if len(p.fams) >= 100_000 { // help texts that change every push: start over
		clear(p.fams)
	}
	p.fams[*m] = m
	return m
}

// enqueue adds b, one snapshot's samples, with staleness markers for the
// series of the last snapshot that it lacks, and keeps the ring within
// its bound. p.mu is held.
func (p *Pusher) enqueue(b *snapshot) {
	seen := len(b.ids)
	for _, id := range p.last {
		if p.mark[id] != p.snaps {
			p.tab.hold(id)
			b.ids, b.values = append(b.ids, id), append(b.values, staleNaN)
		}
	}
	p.tab.release(p.last)
	p.last = append(p.last[:0], b.ids[:seen]...)
	for _, id := range p.last {
		p.tab.hold(id)
	}
	// Built in reused buffers, kept at their exact size: a ring of an
	// hour holds hundreds of these.
	p.idBuf, p.valBuf = b.ids, b.values
	b.ids, b.values = slices.Clone(b.ids), slices.Clone(b.values)
	b.n = len(b.ids)
	if b.n == 0 {
		return
	}
	p.ring = append(p.ring, b)
	p.pending += len(b.ids)
	p.trim()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// spoolSnapshot encodes b, the ring's newest snapshot, into the bodies
// of its requests, lets go of its samples, and writes it to the spool.
// On a full disk the oldest spooled snapshots are dropped to make room
// (counted as spool_full); a snapshot that cannot be written stays in
// memory (its bodies) and is counted in spool_errors. p.mu is held, and
// let go of while the file is written.
func (p *Pusher) spoolSnapshot(b *snapshot) {
	var frames []frame
	for b.done < b.n {
		n := p.chunk(b)
		body, err := requestBody(p.encode(b, n))
		if err != nil {
			// Not expected (the encoders' messages always marshal):
			// the snapshot goes, counted, as send would count it.
			p.dropped[DropError] += float64(b.n)
			p.log.Error("push: cannot encode the snapshot; its samples are dropped", "samples", b.n, "err", err)
			b.done = b.n
			p.tab.release(b.ids)
			p.ring = slices.DeleteFunc(p.ring, func(x *snapshot) bool { return x == b })
			p.pending -= b.n
			return
		}
		frames = append(frames, frame{samples: n, body: body})
		b.done += n
	}
	b.done = 0
	p.tab.release(b.ids)
	b.ids, b.values, b.natives, b.frames = nil, nil, nil, frames
	f := p.spool.name(b.ts, b.n)
	for {
		p.mu.Unlock()
		stored, err := p.spool.store(f, frames)
		p.mu.Lock()
		if err == nil {
			f = stored
			break
		}
		if (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && p.dropOldestSpooled(b, err.Error()) {
			continue
		}
		p.spoolErrors++
		p.log.Error("push: cannot write the snapshot to the spool; it is kept in memory only (a restart loses it)", "dir", p.spool.dir, "err", err)
		return
	}
	if !slices.Contains(p.ring, b) { // sent or dropped meanwhile
		os.Remove(filepath.Join(p.spool.dir, f.name))
		return
	}
	p.spool.add(f)
	b.file, b.spooled, b.frames = f, true, nil
	p.trim()
}

// saveStarts writes the start times of the last snapshot's counters (and
// histograms' and summaries' counts) for the next run, so that a clean
// restart is not a reset to an OTLP receiver: the spooled requests carry
// the start times they were encoded with, and the next run's own keep
// them while the values do not decrease. p.mu is held.
func (p *Pusher) saveStarts() {
	starts := map[string]counterStart{}
	for _, id := range p.last {
		if int(id) < len(p.tab.start) && p.tab.start[id] != 0 {
			starts[p.tab.keys[id]] = counterStart{start: p.tab.start[id], prev: p.tab.prev[id]}
		}
	}
	if err := p.spool.saveStarts(starts); err != nil {
		p.log.Warn("push: cannot keep the counters' start times for the next start; its counters start anew", "file", filepath.Join(p.spool.dir, startsFile), "err", err)
	}
}

// requestBody is req, a request of encode, as it is posted: remote
// write's protobuf snappy-compressed, OTLP's gzipped.
func requestBody(req any) ([]byte, error) {
	var raw []byte
	var err error
	switch r := req.(type) {
	case *colmetricpb.ExportMetricsServiceRequest:
		return otlpBody(r)
	case *writev2.Request:
		raw, err = r.MarshalVT()
	case *writeRequest:
		raw, err = r.marshal()
	default:
		return nil, fmt.Errorf("push: no body for %T", req)
	}
	if err != nil {
		return nil, err
	}
	return snappy.Encode(nil, raw), nil
}

// dropOldestSpooled drops the oldest snapshot on disk other than keep and
// the one being sent, to make room on a full disk; false when there is
// none. p.mu is held.
func (p *Pusher) dropOldestSpooled(keep *snapshot, why string) bool {
	for i, old := range p.ring {
		if old == keep || (i == 0 && p.inFlight) || !old.spooled {
			continue
		}
		n := old.unsent()
		p.pending -= n
		p.dropped[DropSpoolFull] += float64(n)
		p.tab.release(old.ids)
		p.spool.remove(old.file)
		p.ring = slices.Delete(p.ring, i, i+1)
		p.log.Warn("push: dropped the oldest snapshot of the spool to make room", "reason", DropSpoolFull, "samples", n, "dir", p.spool.dir, "why", why)
		return true
	}
	return false
}

// trim keeps the ring within max_pending_samples (with a spool: what it
// holds in memory) and, with a spool, the spool within its bytes and age,
// dropping the oldest first: never what is being sent, nor the newest
// snapshot. p.mu is held.
func (p *Pusher) trim() {
	var cutoff int64
	if p.spool != nil {
		cutoff = p.now().Add(-p.spool.maxAge).UnixMilli()
	}
	first := 0
	if p.inFlight {
		first = 1
	}
	inMemory := p.pending
	if p.spool != nil {
		inMemory = 0
		for _, b := range p.ring {
			if !b.spooled {
				inMemory += b.unsent()
			}
		}
	}
	for i := first; i < len(p.ring)-1; {
		old := p.ring[i]
		var reason string
		switch {
		case p.spool != nil && old.ts < cutoff:
			reason = DropTooOld
		case p.spool != nil && p.spool.bytes > p.spool.maxBytes && old.spooled:
			reason = DropSpoolFull
		case inMemory > p.cfg.MaxPendingSamples && (p.spool == nil || !old.spooled):
			reason = DropRingFull
		}
		if reason == "" {
			if p.spool != nil && (inMemory > p.cfg.MaxPendingSamples || p.spool.bytes > p.spool.maxBytes) {
				i++ // with a spool: what is over its bound may come later
				continue
			}
			break
		}
		n := old.unsent()
		p.pending -= n
		if !old.spooled {
			inMemory -= n
		}
		p.dropped[reason] += float64(n)
		p.tab.release(old.ids)
		if old.spooled {
			p.spool.remove(old.file)
		}
		p.ring = slices.Delete(p.ring, i, i+1)
		p.log.Warn("push: dropped the oldest unsent snapshot", "reason", reason, "samples", n, "max_pending_samples", p.cfg.MaxPendingSamples)
	}
}

// sendLoop sends the ring's head until ctx ends, or until the ring is
// empty once stopping is closed.
func (p *Pusher) sendLoop(ctx context.Context, stopping <-chan struct{}) {
	var (
		cur       *snapshot // with a spool: the snapshot whose frames
		curFrames []frame   // were read from its file last
	)
	for {
		p.mu.Lock()
		for len(p.ring) == 0 {
			p.mu.Unlock()
			select {
			case <-stopping:
				return
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			p.mu.Lock()
		}
		b := p.ring[0]
		p.inFlight = true
		var (
			req any
			n   int
			err error
		)
		if p.spool == nil {
			n = p.chunk(b)
			req = p.encode(b, n)
			p.mu.Unlock()
		} else {
			frames, f := b.frames, b.file
			p.mu.Unlock()
			if frames == nil && cur == b {
				frames = curFrames
			} else if frames == nil {
				frames, err = p.spool.read(f, p.cfg.MaxSamplesPerSend)
				if err != nil {
					err = fmt.Errorf("reading spool file %s: %w", filepath.Join(p.spool.dir, f.name), err)
				}
				cur, curFrames = b, frames
			}
			if err == nil && b.next < len(frames) {
				fr := frames[b.next]
				n = min(fr.samples, b.unsent())
				if b.next == len(frames)-1 {
					n = b.unsent() // the file's last request ends its snapshot
				}
				req, err = fr.request(p.cfg.Protocol)
				if err != nil {
					err = fmt.Errorf("spool file %s, request %d: %w", filepath.Join(p.spool.dir, f.name), b.next, err)
				}
			} else if err == nil {
				err = fmt.Errorf("spool file %s: no request %d", filepath.Join(p.spool.dir, f.name), b.next)
			}
		}
		if err != nil {
			// A spool file that cannot be read: its samples are gone.
			p.mu.Lock()
			p.inFlight = false
			n := b.unsent()
			p.spoolErrors++
			p.dropped[DropError] += float64(n)
			p.log.Error("push: cannot read a spool file; its samples are dropped and the file removed", "samples", n, "err", err)
			b.next++
			p.advance(b, n)
			p.mu.Unlock()
			continue
		}

		out := p.send(ctx, req, n)

		p.mu.Lock()
		p.inFlight = false
		if out == sendAgain {
			p.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			continue
		}
		b.next++
		p.advance(b, n)
		if b.unsent() == 0 && cur == b {
			cur, curFrames = nil, nil
		}
		p.mu.Unlock()
	}
}

// sendOutcome is what became of one request.
type sendOutcome int

const (
	sendDone  sendOutcome = iota // accepted, or dropped (counted)
	sendAgain                    // not sent: ctx ended, or the answer was unreadable
)

// send posts req, n samples, retrying as the client does, and counts the
// outcome.
func (p *Pusher) send(ctx context.Context, req any, n int) sendOutcome {
	p.status.code.Store(0)
	p.status.written.Store(false)
	retry := func(err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failed += float64(n)
		if !p.failing {
			p.failing = true
			p.log.Warn("push: request failed; retrying with backoff until it succeeds (samples queue in the ring meanwhile)", "url", p.url, "err", truncate(err.Error()))
		}
	}
	var (
		err      error
		rejected int    // of n, what the receiver said it did not take
		why      string // and why
	)
	switch r := req.(type) {
	case *colmetricpb.ExportMetricsServiceRequest, otlpGzipped:
		var points int64
		points, why, err = p.otlpWrite(ctx, r, retry)
		rejected = int(min(int64(n), points))
	case *writev2.Request, rw2Message:
		var stats remote.WriteResponseStats
		stats, err = p.api.Write(ctx, remote.WriteV2MessageType, r, remote.WithWriteRetryCallback(retry))
		// A native histogram is one sample here, one histogram there.
		if w := stats.Samples + stats.Histograms; err == nil && w < n {
			rejected, why = n-w, fmt.Sprintf("X-Prometheus-Remote-Write-Samples-Written and -Histograms-Written: %d of %d", w, n)
		}
	default:
		err = p.rw1Write(ctx, req, retry)
	}
	code := int(p.status.code.Load())
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		if rejected > 0 {
			// OTLP's partial success counts data points (a histogram's
			// is several samples); they are counted as samples here.
			p.dropped[DropRejected] += float64(rejected)
			p.log.Error("push: receiver accepted the request but rejected part of it; the rest is dropped, not retried", "url", p.url, "rejected", rejected, "of", n, "message", truncate(why))
			n -= rejected
		} else if why != "" {
			// OTLP: a partial success that rejects nothing is a warning.
			p.log.Warn("push: receiver accepted the request with a warning", "url", p.url, "message", truncate(why))
		}
		p.sent += float64(n)
		p.lastSuccess = p.now()
		if p.failing {
			p.failing = false
			p.log.Info("push: receiver accepts requests again", "url", p.url, "pending_samples", p.pending)
		}
		return sendDone
	case ctx.Err() != nil:
		return sendAgain
	case code >= 400 && code < 500:
		// 429 is retried by the client; every other 4xx is final.
		p.dropped[DropRejected] += float64(n)
		p.log.Error("push: receiver rejected samples; they are dropped, not retried", "url", p.url, "status", code, "samples", n, "err", truncate(err.Error()))
		return sendDone
	case code >= 200 && code < 300 && p.cfg.Protocol == config.PushRemoteWriteV2 && !p.status.written.Load():
		p.dropped[DropRejected] += float64(n)
		p.log.Error("push: samples dropped", "url", p.url, "samples", n, "err", errNoWrittenHeader)
		return sendDone
	case code >= 200 && code < 300:
		// Accepted, but the answer could not be read: send again.
		p.failed += float64(n)
		p.log.Warn("push: reading the receiver's answer failed; sending again", "err", err)
		p.mu.Unlock()
		sleep(ctx, p.cfg.MaxBackoff)
		p.mu.Lock()
		return sendAgain
	default:
		p.dropped[DropError] += float64(n)
		p.log.Error("push: cannot make the request; samples dropped", "url", p.url, "err", truncate(err.Error()))
		return sendDone
	}
}

// advance marks n samples of b, the ring's head, done. p.mu is held.
func (p *Pusher) advance(b *snapshot, n int) {
	b.done += n
	p.pending -= n
	if b.unsent() == 0 {
		p.tab.release(b.ids)
		p.ring = slices.Delete(p.ring, 0, 1)
		if b.spooled {
			p.spool.remove(b.file)
		}
	}
}

// request builds the write request of b's next n samples. p.mu is held:
// the request keeps the table's encoded label sets, not the table.
func (p *Pusher) request(b *snapshot, n int) *writeRequest {
	r := &writeRequest{labels: make([][]byte, n), values: b.values[b.done : b.done+n], ts: b.ts}
	for i, id := range b.ids[b.done : b.done+n] {
		r.labels[i] = p.tab.enc[id]
		if h := p.histAt(b, b.done+i, id, r.values[i]); h != nil {
			raw, err := h.Marshal()
			if err != nil { // not expected: the histogram is made of numbers
				p.log.Error("push: cannot encode a native histogram; its count goes as a float sample", "labels", p.tab.labels[id], "err", err)
				continue
			}
			if r.hists == nil {
				r.hists = map[int][]byte{}
			}
			r.hists[i] = raw
		}
	}
	return r
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// truncate keeps log lines of a receiver's answer short.
func truncate(s string) string {
	const max = 512
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// statusRecorder sets the configured headers on every request and keeps
// the status of the last answer, for telling a rejection (4xx) from other
// errors the client does not retry.
type statusRecorder struct {
	next    http.RoundTripper
	headers map[string]string
	code    atomic.Int32
	written atomic.Bool // the answer had X-Prometheus-Remote-Write-Samples-Written
}

func (s *statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(s.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range s.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := s.next.RoundTrip(r)
	if resp != nil {
		s.code.Store(int32(resp.StatusCode))
		s.written.Store(resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written") != "")
	}
	return resp, err
}

// pusherDescs are a pusher's self-metrics, labelled with its target:
// remote_name and url, as Prometheus's prometheus_remote_storage_* are.
type pusherDescs struct {
	sent, failed, dropped, pending, oldest, lag, lastSuccess, spoolBytes, spoolErrors, series *prometheus.Desc
}

func newDescs(name, url string) pusherDescs {
	l := prometheus.Labels{"remote_name": name, "url": url}
	d := func(metric, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(metric, help, labels, l)
	}
	return pusherDescs{
		sent:        d("plexporter_push_samples_sent_total", "Samples the receiver accepted."),
		failed:      d("plexporter_push_samples_failed_total", "Samples of requests that failed with a retryable error (5xx, 429, network) and were sent again."),
		dropped:     d("plexporter_push_samples_dropped_total", "Samples never sent, by reason: ring_full (over push.max_pending_samples, oldest first), rejected (4xx other than 429, or refused in a 2xx answer: remote write 2.0's written-samples header, OTLP's partial success), shutdown (pending past the flush timeout), error (request not made, or a spool file unreadable); with a spool: too_old (over push.spool_max_age), spool_full (over push.spool_max_bytes, or the disk full), other_protocol (files an earlier run wrote in another push.protocol).", "reason"),
		pending:     d("plexporter_push_pending_samples", "Samples waiting to be sent: the ring's, in memory or in the spool."),
		oldest:      d("plexporter_push_oldest_unsent_timestamp_seconds", "Timestamp of the oldest sample not yet sent (0: none pending)."),
		lag:         d("plexporter_push_lag_seconds", "How old the oldest unsent sample is (0: none pending)."),
		lastSuccess: d("plexporter_push_last_success_timestamp_seconds", "When a request last succeeded (0: never)."),
		spoolBytes:  d("plexporter_push_spool_bytes", "Bytes of the spool's files (push.spool_dir)."),
		spoolErrors: d("plexporter_push_spool_errors_total", "Spool files that could not be written (the snapshot stayed in memory only) or read (the file was removed)."),
		series:      d("plexporter_push_series", "Label sets held by the pending batches and the last snapshot."),
	}
}

// Describe implements prometheus.Collector.
func (p *Pusher) Describe(ch chan<- *prometheus.Desc) {
	d := p.descs
	for _, d := range []*prometheus.Desc{d.sent, d.failed, d.dropped, d.pending, d.oldest, d.lag, d.lastSuccess, d.series, d.spoolBytes, d.spoolErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *Pusher) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(p.descs.sent, prometheus.CounterValue, p.sent)
	ch <- prometheus.MustNewConstMetric(p.descs.failed, prometheus.CounterValue, p.failed)
	for r, v := range p.dropped {
		ch <- prometheus.MustNewConstMetric(p.descs.dropped, prometheus.CounterValue, v, r)
	}
	ch <- prometheus.MustNewConstMetric(p.descs.pending, prometheus.GaugeValue, float64(p.pending))
	oldest, lag := 0.0, 0.0
	if len(p.ring) > 0 {
		oldest = float64(p.ring[0].ts) / 1000
	}
	if oldest > 0 {
		lag = max(0, float64(p.now().UnixMilli())/1000-oldest)
	}
	ch <- prometheus.MustNewConstMetric(p.descs.oldest, prometheus.GaugeValue, oldest)
	ch <- prometheus.MustNewConstMetric(p.descs.lag, prometheus.GaugeValue, lag)
	last := 0.0
	if !p.lastSuccess.IsZero() {
		last = float64(p.lastSuccess.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(p.descs.lastSuccess, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(p.descs.series, prometheus.GaugeValue, float64(p.tab.len()))
	if p.spool != nil {
		ch <- prometheus.MustNewConstMetric(p.descs.spoolBytes, prometheus.GaugeValue, float64(p.spool.bytes))
		ch <- prometheus.MustNewConstMetric(p.descs.spoolErrors, prometheus.CounterValue, p.spoolErrors)
	}
}

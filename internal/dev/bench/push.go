package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"github.com/prometheus/prometheus/prompb"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
	"github.com/plexporter/plexporter/internal/dev/proctree"
)

// pushProtocols are the push protocols scenario 9 measures, each with the
// receiver's path its host pushes to.
var pushProtocols = []struct{ name, path string }{
	{"prometheus.remote_write.v1", "/rw1"},
	{"prometheus.remote_write.v2", "/rw2"},
	{"otlp", "/otlp"},
}

// pushReceiver takes the pushes of scenario 9's hosts, one path per
// protocol: it decodes each request and notes, per path, when each push
// (a timestamp) first arrived and how many samples it held.
type pushReceiver struct {
	url string
	srv *http.Server

	mu      sync.Mutex
	first   map[string]map[int64]time.Time // path -> push timestamp (ms) -> first request's arrival
	samples map[string]map[int64]int       // path -> push timestamp -> samples
	err     error                          // the first request that could not be read
}

func startPushReceiver() (*pushReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &pushReceiver{url: "http://" + ln.Addr().String(), first: map[string]map[int64]time.Time{}, samples: map[string]map[int64]int{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *pushReceiver) stop() { r.srv.Close() }

func (r *pushReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	arrived := time.Now()
	ts, n, err := decodePush(req)
	if err != nil {
		r.mu.Lock()
		if r.err == nil {
			r.err = fmt.Errorf("push receiver: %s: %w", req.URL.Path, err)
		}
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	if r.first[req.URL.Path] == nil {
		r.first[req.URL.Path], r.samples[req.URL.Path] = map[int64]time.Time{}, map[int64]int{}
	}
	if _, ok := r.first[req.URL.Path][ts]; !ok {
		r.first[req.URL.Path][ts] = arrived
	}
	r.samples[req.URL.Path][ts] += n
	r.mu.Unlock()
	switch req.URL.Path {
	case "/rw2":
		// Remote write 2.0: a receiver says what it wrote.
		w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(n))
		w.Header().Set("X-Prometheus-Remote-Write-Histograms-Written", "0")
		w.Header().Set("X-Prometheus-Remote-Write-Exemplars-Written", "0")
		w.WriteHeader(http.StatusNoContent)
	case "/otlp":
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportMetricsServiceResponse
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// decodePush reads one push request: its timestamp (ms; a request holds
// one push's samples) and its number of samples.
func decodePush(req *http.Request) (ts int64, n int, err error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 256<<20))
	if err != nil {
		return 0, 0, err
	}
	switch req.URL.Path {
	case "/rw1":
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			return 0, 0, err
		}
		var wr prompb.WriteRequest
		if err := wr.Unmarshal(raw); err != nil {
			return 0, 0, err
		}
		for _, s := range wr.Timeseries {
			for _, smp := range s.Samples {
				ts, n = smp.Timestamp, n+1
			}
		}
	case "/rw2":
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			return 0, 0, err
		}
		var wr writev2.Request
		if err := wr.UnmarshalVT(raw); err != nil {
			return 0, 0, err
		}
		for _, s := range wr.Timeseries {
			for _, smp := range s.Samples {
				ts, n = smp.Timestamp, n+1
			}
		}
	case "/otlp":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return 0, 0, err
		}
		var er colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(raw, &er); err != nil {
			return 0, 0, err
		}
		for _, rm := range er.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					for _, dp := range m.GetGauge().GetDataPoints() {
						ts, n = int64(dp.TimeUnixNano/1e6), n+1
					}
					for _, dp := range m.GetSum().GetDataPoints() {
						ts, n = int64(dp.TimeUnixNano/1e6), n+1
					}
					for _, dp := range m.GetHistogram().GetDataPoints() {
						ts, n = int64(dp.TimeUnixNano/1e6), n+len(dp.BucketCounts)+2
					}
					for _, dp := range m.GetSummary().GetDataPoints() {
						ts, n = int64(dp.TimeUnixNano/1e6), n+len(dp.QuantileValues)+2
					}
				}
			}
		}
	default:
		return 0, 0, fmt.Errorf("no protocol at %s", req.URL.Path)
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("a request without samples")
	}
	return ts, n, nil
}

// pushes returns how many pushes to path began arriving in [from, to), and
// the median of their samples.
func (r *pushReceiver) pushes(path string, from, to time.Time) (int, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k int
	var sizes []float64
	for ts, at := range r.first[path] {
		if !at.Before(from) && at.Before(to) {
			k++
			sizes = append(sizes, float64(r.samples[path][ts]))
		}
	}
	return k, median(sizes)
}

// pushInterval and pushWindow: each run counts the pushes that began in a
// window of pushWindow, every pushInterval, and the CPU the pushing
// hosts spent over it.
const (
	pushInterval = time.Second
	pushWindow   = 10 * time.Second
)

// scenarioPush is scenario 9 (issue 31): the host's CPU for one push of
// 100k series, with each protocol, beside one scrape of the same 100k.
// Three hosts push, one per protocol, to a receiver in the harness that
// reads every request; a fourth is scraped. A run is a window in which
// the pushing hosts push every pushInterval (their CPU over the window
// divided by the pushes that began in it), then a run of text scrapes and
// one of text+gzip scrapes of the fourth (measureRun): the same minutes.
func (h *harness) scenarioPush() error {
	sec := &section{id: "9", title: "Push: one push of 100k series vs one scrape (host + 1 plugin)"}
	defer h.report.add(sec)
	const n = 100000
	recv, err := startPushReceiver()
	if err != nil {
		return err
	}
	defer recv.stop()
	scraped, err := h.benchHost("push-scraped", n, 1)
	if err != nil {
		return err
	}
	pushers := make([]*exporter, len(pushProtocols))
	for i, p := range pushProtocols {
		if pushers[i], err = h.benchHost("push-"+p.path[1:], n, 1,
			"--push.url="+recv.url+p.path, "--push.protocol="+p.name, "--push.interval="+pushInterval.String()); err != nil {
			return err
		}
	}
	type cells struct{ all, host, size []float64 }
	push := make([]cells, len(pushProtocols))
	var text, gz cell
	for run := range h.runs {
		var c0, h0 []float64
		for _, e := range pushers {
			all, err := proctree.CPUSum(e.pids())
			if err != nil {
				return err
			}
			host, err := proctree.CPU(e.pid())
			if err != nil {
				return err
			}
			c0, h0 = append(c0, all), append(h0, host)
		}
		from := time.Now()
		time.Sleep(pushWindow)
		to := time.Now()
		for i, e := range pushers {
			all, err := proctree.CPUSum(e.pids())
			if err != nil {
				return err
			}
			host, err := proctree.CPU(e.pid())
			if err != nil {
				return err
			}
			k, size := recv.pushes(pushProtocols[i].path, from, to)
			if k == 0 {
				return fmt.Errorf("%s: no push arrived in %v (run %d)\n%s", pushProtocols[i].name, pushWindow, run+1, e.logTail())
			}
			push[i].all = append(push[i].all, (all-c0[i])/float64(k))
			push[i].host = append(push[i].host, (host-h0[i])/float64(k))
			push[i].size = append(push[i].size, size)
		}
		for _, f := range []struct {
			f format
			c *cell
		}{{fmtText, &text}, {fmtTextGzip, &gz}} {
			r, err := h.measureRun(scraped, f.f)
			if err != nil {
				return err
			}
			f.c.add(r)
		}
	}
	recv.mu.Lock()
	rerr := recv.err
	recv.mu.Unlock()
	if rerr != nil {
		return rerr
	}
	sec.text = append(sec.text, fmt.Sprintf("Three hosts push the scenario 1 workload (%d series from the bench plugin, plus the host's own) "+
		"every %v, one per protocol, to a receiver in the harness that decodes every request (its CPU is not counted); a fourth "+
		"host is scraped. A run counts the pushes that began arriving in a %v window and the pushing hosts' CPU over it "+
		"(host and plugin; the plugin collects once per push as it does once per scrape), then scrapes the fourth host "+
		"(text, then text+gzip, as scenario 1). Medians of %d runs; ratios are of the medians.",
		workload.Series(n), pushInterval, pushWindow, h.runs))
	rows := [][]string{
		{"scrape, text", ms(text.CPU()), ms(text.HostCPU()), "1", "", fmt.Sprint(text.bytes)},
		{"scrape, text+gzip", ms(gz.CPU()), ms(gz.HostCPU()), ratio(gz.CPU(), text.CPU()), "1", fmt.Sprint(gz.bytes)},
	}
	for i, p := range pushProtocols {
		all, host := median(push[i].all), median(push[i].host)
		rows = append(rows, []string{"push, " + p.name, ms(all), ms(host), ratio(all, text.CPU()), ratio(all, gz.CPU()),
			fmt.Sprintf("%.0f samples", median(push[i].size))})
		if i == 0 {
			h.report.atMost("9", "100k series: CPU of a push (remote write 1.0, the default) ≤ 1.5× a text scrape's (same run)", "×", all/text.CPU(), 1.5)
		}
	}
	sec.text = append(sec.text, table([]string{"", "CPU ms (host + plugin)", "host CPU ms", "× text scrape", "× text+gzip scrape", "a scrape's bytes / a push's samples"}, rows))
	return nil
}

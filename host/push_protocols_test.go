package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// pushedSeries is a series a receiver got, as Prometheus names it.
type pushedSeries struct {
	metric model.Metric
	value  float64
	typ    string // the family's type as the protocol says it
	stale  bool   // a staleness marker (RW) or NoRecordedValue (OTLP)
}

// snapshots keeps what a receiver got by timestamp (ms).
type snapshots struct {
	mu    sync.Mutex
	by    map[int64][]pushedSeries
	order []int64
}

func (s *snapshots) add(ts int64, ps pushedSeries) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[int64][]pushedSeries{}
	}
	if _, ok := s.by[ts]; !ok {
		s.order = append(s.order, ts)
	}
	s.by[ts] = append(s.by[ts], ps)
}

// chaos returns the chaos_value series of the latest snapshot that has
// n of them, and whether any snapshot had a stale chaos series.
func (s *snapshots) chaos(n int) (latest map[string]pushedSeries, sawStale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.order {
		got := map[string]pushedSeries{}
		for _, ps := range s.by[ts] {
			name := string(ps.metric["__name__"])
			if len(name) < 11 || name[:11] != "chaos_value" {
				continue
			}
			if ps.stale {
				sawStale = true
				continue
			}
			got[ps.metric.String()] = ps
		}
		if len(got) == n {
			latest = got
		}
	}
	return latest, sawStale
}

// comparePushed compares the receiver's latest full chaos snapshot with
// what /metrics serves, then removes the plugin and waits for its series'
// staleness markers.
func comparePushed(t *testing.T, h *host, got *snapshots, types map[dto.MetricType]string) {
	const n = 4 + 2*(11+2) // 4 gauges, 2 histograms of 10 bounds and +Inf, _sum, _count
	var latest map[string]pushedSeries
	h.waitFor(minWait, "a pushed snapshot", func() bool { latest, _ = got.chaos(n); return latest != nil })
	_, served := h.scrape("")
	for _, name := range []string{"chaos_value", "chaos_value_seconds"} {
		v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, served[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v {
			m := s.Metric.Clone()
			m["job"], m["cluster"] = "pushed", "lab"
			g, ok := latest[m.String()]
			if !ok || g.value != float64(s.Value) || g.typ != types[served[name].GetType()] {
				t.Errorf("%s: /metrics serves %v (%v), the receiver got %v (%q, present %v)", m, s.Value, served[name].GetType(), g.value, g.typ, ok)
			}
		}
	}
	if err := os.Remove(filepath.Join(h.dir, "plexporter-alpha")); err != nil {
		t.Fatal(err)
	}
	h.waitFor(minWait, "the removed plugin's series marked stale", func() bool { _, stale := got.chaos(n); return stale })
	_, mfs := h.scrape("")
	if v := value(mfs, "plexporter_push_samples_dropped_total", "reason", "rejected"); v != 0 {
		t.Errorf("rejected samples: %v", v)
	}
}

const pushConfig = `  alpha: {config: {series: 4, histograms: 2, duplicates: 2}}
push:
  url: %s
  protocol: %s
  interval: 1s
  external_labels: {job: pushed, cluster: lab}
`

// TestPushRemoteWrite2FromTheHost: the host pushes with remote write 2.0
// to client_golang's remote write handler; what arrives is what /metrics
// serves, with each family's type, and the series of a removed plugin get
// staleness markers.
func TestPushRemoteWrite2FromTheHost(t *testing.T) {
	got := &snapshots{}
	srv := httptest.NewServer(rw2Receiver(got))
	defer srv.Close()
	h := startHost(t, []string{"alpha"}, fmt.Sprintf(pushConfig, srv.URL+"/api/v1/write", "prometheus.remote_write.v2"))
	comparePushed(t, h, got, map[dto.MetricType]string{
		dto.MetricType_GAUGE: "METRIC_TYPE_GAUGE", dto.MetricType_COUNTER: "METRIC_TYPE_COUNTER", dto.MetricType_HISTOGRAM: "METRIC_TYPE_HISTOGRAM",
	})
}

// rw2Receiver is client_golang's remote write handler taking 2.0, keeping
// what it gets in got.
func rw2Receiver(got *snapshots) http.Handler {
	store := storeFunc(func(r *http.Request, _ remote.WriteMessageType) (*remote.WriteResponse, error) {
		resp := remote.NewWriteResponse()
		body, _ := io.ReadAll(r.Body)
		var req writev2.Request
		if err := req.UnmarshalVT(body); err != nil {
			resp.SetStatusCode(http.StatusBadRequest)
			return resp, err
		}
		for _, ts := range req.Timeseries {
			ls := writev2.DesymbolizeLabels(ts.LabelsRefs, req.Symbols, nil)
			m := model.Metric{}
			for i := 0; i+1 < len(ls); i += 2 {
				m[model.LabelName(ls[i])] = model.LabelValue(ls[i+1])
			}
			for _, s := range ts.Samples {
				got.add(s.Timestamp, pushedSeries{metric: m, value: s.Value, typ: ts.GetMetadata().GetType().String(), stale: math.Float64bits(s.Value) == staleNaNBits})
			}
			resp.Add(remote.WriteResponseStats{Samples: len(ts.Samples)})
		}
		return resp, nil
	})
	return remote.NewWriteHandler(store, remote.MessageTypes{remote.WriteV2MessageType})
}

// staleNaNBits is Prometheus's staleness marker.
const staleNaNBits = 0x7ff0000000000002

type storeFunc func(*http.Request, remote.WriteMessageType) (*remote.WriteResponse, error)

func (f storeFunc) Store(r *http.Request, m remote.WriteMessageType) (*remote.WriteResponse, error) {
	return f(r, m)
}

// TestPushOTLPFromTheHost: the host pushes OTLP/HTTP to a receiver that
// decodes the OTLP protos; each data point, read back as the Prometheus
// series it stands for, is what /metrics serves; the removed plugin's
// points are flagged NoRecordedValue.
func TestPushOTLPFromTheHost(t *testing.T) {
	got := &snapshots{}
	srv := httptest.NewServer(otlpReceiver(got))
	defer srv.Close()
	h := startHost(t, []string{"alpha"}, fmt.Sprintf(pushConfig, srv.URL+"/v1/metrics", "otlp"))
	comparePushed(t, h, got, map[dto.MetricType]string{dto.MetricType_GAUGE: "gauge", dto.MetricType_COUNTER: "sum", dto.MetricType_HISTOGRAM: "histogram"})
}

// otlpReceiver decodes OTLP/HTTP requests with the OTLP protos, keeping
// each data point in got as the Prometheus series it stands for.
func otlpReceiver(got *snapshots) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(zr)
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil || r.URL.Path != "/v1/metrics" {
			http.Error(w, fmt.Sprint(err), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			res := model.Metric{}
			for _, a := range rm.GetResource().GetAttributes() {
				k := a.Key
				if k == "service.name" {
					k = "job"
				}
				res[model.LabelName(k)] = model.LabelValue(a.GetValue().GetStringValue())
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					add := func(name string, attrs []*commonpb.KeyValue, extra, extraVal string, v float64, ts uint64, flags uint32, typ string) {
						l := res.Clone()
						l["__name__"] = model.LabelValue(name)
						for _, a := range attrs {
							l[model.LabelName(a.Key)] = model.LabelValue(a.GetValue().GetStringValue())
						}
						if extra != "" {
							l[model.LabelName(extra)] = model.LabelValue(extraVal)
						}
						got.add(int64(ts/1e6), pushedSeries{metric: l, value: v, typ: typ, stale: flags&uint32(metricspb.DataPointFlags_DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK) != 0})
					}
					switch d := m.Data.(type) {
					case *metricspb.Metric_Gauge:
						for _, dp := range d.Gauge.DataPoints {
							add(m.Name, dp.Attributes, "", "", dp.GetAsDouble(), dp.TimeUnixNano, dp.Flags, "gauge")
						}
					case *metricspb.Metric_Sum:
						for _, dp := range d.Sum.DataPoints {
							add(m.Name, dp.Attributes, "", "", dp.GetAsDouble(), dp.TimeUnixNano, dp.Flags, "sum")
						}
					case *metricspb.Metric_Histogram:
						for _, dp := range d.Histogram.DataPoints {
							cum := uint64(0)
							for j, c := range dp.BucketCounts {
								cum += c
								le := math.Inf(1)
								if j < len(dp.ExplicitBounds) {
									le = dp.ExplicitBounds[j]
								}
								add(m.Name+"_bucket", dp.Attributes, "le", model.FloatString(le).String(), float64(cum), dp.TimeUnixNano, dp.Flags, "histogram")
							}
							add(m.Name+"_sum", dp.Attributes, "", "", dp.GetSum(), dp.TimeUnixNano, dp.Flags, "histogram")
							add(m.Name+"_count", dp.Attributes, "", "", float64(dp.Count), dp.TimeUnixNano, dp.Flags, "histogram")
						}
					}
				}
			}
		}
		out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
}

// TestPushSpoolSurvivesAHostCrashV2AndOTLP is TestPushSpoolSurvivesAHostCrash
// with remote write 2.0 and OTLP, against receivers of their own packages:
// the host spools while nothing listens at the push URL, is killed
// (SIGKILL), and a new host on the same spool sends the killed one's
// snapshots once the receiver is up, before its own: every spooled
// timestamp arrives once, and the timestamps arrive in order.
func TestPushSpoolSurvivesAHostCrashV2AndOTLP(t *testing.T) {
	for _, c := range []struct {
		protocol, path, ext string
		receiver            func(*snapshots) http.Handler
	}{
		{"prometheus.remote_write.v2", "/api/v1/write", ".rw2", rw2Receiver},
		{"otlp", "/v1/metrics", ".otlp", otlpReceiver},
	} {
		t.Run(c.protocol, func(t *testing.T) {
			addr := freePort(t)
			spool := filepath.Join(t.TempDir(), "spool")
			cfg := fmt.Sprintf(`  alpha: {config: {series: 2}}
push:
  url: http://%s%s
  protocol: %s
  interval: 500ms
  external_labels: {job: pushed}
  min_backoff: 50ms
  max_backoff: 200ms
  spool_dir: %s
`, addr, c.path, c.protocol, spool)
			first := startHost(t, []string{"alpha"}, cfg)
			var files []string
			first.waitFor(minWait, "three snapshots spooled", func() bool {
				files, _ = filepath.Glob(filepath.Join(spool, "*"+c.ext))
				return len(files) >= 3
			})
			first.cmd.Process.Kill()
			first.cmd.Wait()
			files, _ = filepath.Glob(filepath.Join(spool, "*"+c.ext))
			var stamps []int64
			for _, f := range files {
				ms, _, _ := strings.Cut(filepath.Base(f), "-")
				n, err := strconv.ParseInt(ms, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				stamps = append(stamps, n)
			}
			t.Logf("the killed host left %d snapshots in the spool", len(stamps))

			got := &snapshots{}
			second := startHost(t, []string{"alpha"}, cfg)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(c.receiver(got))
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			defer srv.Close()
			second.waitFor(minWait, "the spool emptied", func() bool {
				left, _ := filepath.Glob(filepath.Join(spool, "*"+c.ext))
				for _, l := range left {
					if slices.Contains(files, l) {
						return false
					}
				}
				return true
			})
			got.mu.Lock()
			defer got.mu.Unlock()
			for _, at := range stamps {
				n := 0
				for _, ps := range got.by[at] {
					if ps.metric["__name__"] == "plexporter_build_info" {
						n++
					}
				}
				if n != 1 {
					t.Errorf("at %d the receiver got plexporter_build_info %d times, want once: the killed host's snapshot", at, n)
				}
			}
			for i := 1; i < len(got.order); i++ {
				if got.order[i] <= got.order[i-1] {
					t.Errorf("timestamps arrived out of order: %v", got.order)
					break
				}
			}
			if len(got.order) < len(stamps) || !slices.Equal(got.order[:len(stamps)], stamps) {
				t.Errorf("arrived %v, want the spool's %v first", got.order, stamps)
			}
			_, mfs := second.scrape("")
			for _, r := range []string{"rejected", "other_protocol", "error"} {
				if v := value(mfs, "plexporter_push_samples_dropped_total", "reason", r); v != 0 {
					t.Errorf("dropped{%s}: %v", r, v)
				}
			}
		})
	}
}

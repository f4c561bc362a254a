package push

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/klauspost/compress/snappy"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	dto "github.com/prometheus/client_model/go"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	gproto "google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/internal/dev/bench/workload"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// nodeLike is n series in families of 100, each with four labels, as a
// node's plugins write them.
func nodeLike(n int) []*dto.MetricFamily {
	var mfs []*dto.MetricFamily
	for f := 0; f*100 < n; f++ {
		mf := &dto.MetricFamily{Name: proto.String(fmt.Sprintf("rdma_port_counter_%d_total", f)), Help: proto.String("h"), Type: dto.MetricType_COUNTER.Enum()}
		for i := 0; i < 100 && f*100+i < n; i++ {
			mf.Metric = append(mf.Metric, &dto.Metric{Label: []*dto.LabelPair{
				{Name: proto.String("device"), Value: proto.String(fmt.Sprintf("mlx5_%d", i%16))},
				{Name: proto.String("port"), Value: proto.String(fmt.Sprint(i / 16))},
				{Name: proto.String("hca_type"), Value: proto.String("MT4129")},
				{Name: proto.String("node_guid"), Value: proto.String("b8:3f:d2:03:00:aa:bb:cc")},
			}, Counter: &dto.Counter{Value: proto.Float64(float64(i) * 1e9)}})
		}
		mfs = append(mfs, mf)
	}
	return mfs
}

// BenchmarkPush100k is one push of 100k series: flatten, queue, and send
// (protobuf, snappy, HTTP) to a receiver that reads and discards.
func BenchmarkPush100k(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(204)
	}))
	defer srv.Close()
	mfs := nodeLike(100_000)
	p := newPusher(b, srv.URL, func(context.Context) []*dto.MetricFamily { return mfs }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopping := make(chan struct{})
	go p.sendLoop(ctx, stopping)
	b.ReportAllocs()
	for b.Loop() {
		p.Snapshot(context.Background())
		for metricB(p) > 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func metricB(p *Pusher) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

// TestRingMemoryOfAnHour measures the heap an hour of 10k series at 15 s
// (240 snapshots, 2.4M samples) holds while the receiver is away.
func TestRingMemoryOfAnHour(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	mfs := nodeLike(10_000)
	var k int
	p := newPusher(t, "http://127.0.0.1:1", func(context.Context) []*dto.MetricFamily {
		k++
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				m.Counter.Value = proto.Float64(float64(k))
			}
		}
		return mfs
	}, nil)
	p.cfg.MaxPendingSamples = 3_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 240 {
		p.Snapshot(context.Background())
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if p.pending != 2_400_000 {
		t.Fatalf("pending %d", p.pending)
	}
	grew := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	t.Logf("an hour of 10k series (2.4M samples) pending: heap +%.1f MiB (%.1f bytes a sample, label sets included)", grew, float64(after.HeapAlloc-before.HeapAlloc)/2.4e6)
	if grew > 64 {
		t.Errorf("heap +%.1f MiB, over the 64 MiB budget", grew)
	}
	runtime.KeepAlive(mfs)
}

// BenchmarkPushPipeline is the host's CPU work for one push of the
// performance harness's 100k-series workload without the transports, to
// set beside expose's BenchmarkHostPipeline (one scrape's): decode the
// plugin's messages, merge through the guard, convert (expose.ToDTO),
// flatten into the ring (the series known from the last push), and build,
// marshal and snappy-encode every request as rw1Write does.
//
//	go test ./host/internal/push -run '^$' -bench PushPipeline -count 6
func BenchmarkPushPipeline(b *testing.B) {
	src := pipelineSource(b)
	p, err := New(config.Push{URL: "http://127.0.0.1:1"}, src, "bench", slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	var bytes int
	rawp, zp := new([]byte), new([]byte)
	b.ReportAllocs()
	for b.Loop() {
		p.Snapshot(context.Background())
		bytes = 0
		for len(p.ring) > 0 {
			n := min(p.cfg.MaxSamplesPerSend, p.ring[0].unsent())
			raw, err := rw1Body(p.request(p.ring[0], n), rawp, zp)
			if err != nil {
				b.Fatal(err)
			}
			bytes += len(raw)
			p.advance(p.ring[0], n)
		}
	}
	b.ReportMetric(float64(bytes), "bytes/op")
	b.ReportMetric(float64(p.tab.len()), "series")
}

// BenchmarkPushPipelineProtocols is BenchmarkPushPipeline with remote
// write 2.0's and OTLP's encoders: each request built, marshalled and
// compressed (remote write: snappy; OTLP: gzip) as it would be posted.
//
//	go test ./host/internal/push -run '^$' -bench PushPipelineProtocols -count 6
func BenchmarkPushPipelineProtocols(b *testing.B) {
	for _, proto := range []string{config.PushRemoteWriteV2, config.PushOTLP} {
		b.Run(proto, func(b *testing.B) {
			p, err := New(config.Push{URL: "http://127.0.0.1:1", Protocol: proto}, pipelineSource(b), "bench", slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			var bytes int
			b.ReportAllocs()
			for b.Loop() {
				p.Snapshot(context.Background())
				bytes = 0
				for len(p.ring) > 0 {
					n := p.chunk(p.ring[0])
					var raw []byte
					switch req := p.encode(p.ring[0], n).(type) {
					case *writev2.Request:
						raw, err = writeEncode(req)
					case *colmetricpb.ExportMetricsServiceRequest:
						raw, err = otlpBody(req)
					}
					if err != nil {
						b.Fatal(err)
					}
					bytes += len(raw)
					p.advance(p.ring[0], n)
				}
			}
			b.ReportMetric(float64(bytes), "bytes/op")
		})
	}
}

// encodeBufs are the buffers writeEncode reuses, as remote.API's pool.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// writeEncode is what client_golang's remote.API.Write does with a
// remote write 2.0 request before posting it: Size and MarshalToSizedBuffer (the VT methods
// for remote write 2.0's types) into a pooled buffer, snappy.Encode into
// another. The result is valid until the next call.
func writeEncode(msg interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}) ([]byte, error) {
	buf, comp := encodeBufs.Get().(*[]byte), encodeBufs.Get().(*[]byte)
	defer encodeBufs.Put(buf)
	defer encodeBufs.Put(comp)
	n := msg.SizeVT()
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	*buf = (*buf)[:n]
	if _, err := msg.MarshalToSizedBufferVT(*buf); err != nil {
		return nil, err
	}
	if m := snappy.MaxEncodedLen(n); cap(*comp) < m {
		*comp = make([]byte, m)
	}
	*comp = (*comp)[:cap(*comp)]
	return snappy.Encode(*comp, *buf), nil
}

// pipelineSource decodes and merges the 100k-series workload's batches,
// as the host does for each round.
func pipelineSource(b *testing.B) Source {
	var wire [][]byte
	plan := workload.NewPlan(100000, 0, 1)
	for _, bt := range batchtest.Record(plan.Write) {
		buf, err := gproto.Marshal(&pluginv1.CollectResponse{Batch: bt})
		if err != nil {
			b.Fatal(err)
		}
		wire = append(wire, buf)
	}
	src := func(context.Context) []*guard.Family {
		in := guard.Input{Plugin: "bench1", MaxSeries: 1 << 30}
		for _, buf := range wire {
			var msg pluginv1.CollectResponse
			if err := gproto.Unmarshal(buf, &msg); err != nil {
				b.Fatal(err)
			}
			in.Batches = append(in.Batches, msg.Batch)
		}
		return guard.Merge([]guard.Input{in}, guard.Options{MaxLabelValueLen: 4096}).Families
	}
	return src
}

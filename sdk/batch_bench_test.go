package sdk_test

import (
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Micro-benchmarks of the plugin side of a collect (batch build with the
// Writer, proto marshal as gRPC does before sending) and of the host's first
// step (proto unmarshal of the received batches). The samples are shaped like
// internal/testkit/batchtest.Mix: counters with 3 labels, gauges with 2 and
// 10-bucket histograms, 6:3:1 by sample; label values are prepared up front,
// as a plugin holds them when it writes.
//
//	go test ./sdk -run '^$' -bench Batch -count 6 | benchstat -

var (
	benchCtr   = sdk.NewDesc("x_rx_bytes_total", sdk.Counter, "Bytes received.", "device", "port", "queue")
	benchGauge = sdk.NewDesc("x_link_speed_bytes", sdk.Gauge, "Link speed.", "device", "port")
	benchHist  = sdk.NewDesc("x_latency_seconds", sdk.Histogram, "Latency.", "device", "op")
	benchBound = []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}
)

type benchSample struct {
	kind int // 0 histogram, 1 gauge, 2 counter
	lv   []string
	v    float64
	cum  []uint64
}

func benchMix(n int) []benchSample {
	out := make([]benchSample, n)
	for i := range n {
		dev, port := "mlx5_"+strconv.Itoa(i/1000), strconv.Itoa(i%1000)
		switch i % 10 {
		case 0:
			cum := make([]uint64, len(benchBound))
			for j := range cum {
				cum[j] = uint64(i + j*3)
			}
			out[i] = benchSample{kind: 0, lv: []string{dev, port}, v: float64(i) * 0.37, cum: cum}
		case 1, 2, 3:
			out[i] = benchSample{kind: 1, lv: []string{dev, port}, v: 1.25e11}
		default:
			out[i] = benchSample{kind: 2, lv: []string{dev, port, "q" + strconv.Itoa(i%7)}, v: float64(i) * 1234.5}
		}
	}
	return out
}

func writeMix(w *sdk.Writer, mix []benchSample) {
	for i := range mix {
		s := &mix[i]
		switch s.kind {
		case 0:
			w.Histogram(benchHist, benchBound, s.cum, s.cum[len(s.cum)-1]+7, s.v, s.lv...)
		case 1:
			w.Gauge(benchGauge, s.v, s.lv...)
		default:
			w.Counter(benchCtr, s.v, s.lv...)
		}
	}
}

func buildBatches(mix []benchSample) []*pluginv1.Batch {
	return batchtest.Record(func(w *sdk.Writer) { writeMix(w, mix) })
}

var benchSizes = []int{1000, 10000, 100000}

// BenchmarkBatchBuild: the Writer packing one collect into batches.
func BenchmarkBatchBuild(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("samples="+strconv.Itoa(n), func(b *testing.B) {
			mix := benchMix(n)
			b.ReportAllocs()
			for b.Loop() {
				w := sdktest.NewWriter(nil, "", func(*pluginv1.CollectResponse) error { return nil })
				writeMix(w, mix)
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/sample")
		})
	}
}

func marshalAll(b *testing.B, batches []*pluginv1.Batch) ([][]byte, int64) {
	var out [][]byte
	var total int64
	for _, batch := range batches {
		buf, err := proto.Marshal(&pluginv1.CollectResponse{Batch: batch})
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, buf)
		total += int64(len(buf))
	}
	return out, total
}

// BenchmarkBatchMarshal: proto encoding of one collect's messages, what gRPC
// does in the plugin before each Send.
func BenchmarkBatchMarshal(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("samples="+strconv.Itoa(n), func(b *testing.B) {
			batches := buildBatches(benchMix(n))
			_, size := marshalAll(b, batches)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for _, batch := range batches {
					if _, err := proto.Marshal(&pluginv1.CollectResponse{Batch: batch}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkBatchDecode: proto.Unmarshal of one collect's messages, what gRPC
// does in the host for each Recv.
func BenchmarkBatchDecode(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("samples="+strconv.Itoa(n), func(b *testing.B) {
			wire, size := marshalAll(b, buildBatches(benchMix(n)))
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for _, buf := range wire {
					var msg pluginv1.CollectResponse
					if err := proto.Unmarshal(buf, &msg); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

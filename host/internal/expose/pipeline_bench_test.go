package expose

import (
	"compress/gzip"
	"io"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// BenchmarkHostPipeline is the host's CPU work for one scrape of the
// performance harness's 100k-series workload without the transports: decode
// every plugin's messages (proto.Unmarshal, as gRPC's Recv does), merge
// through the guard, encode (and gzip at BestSpeed, as the web handler
// does). cpu-ms/op is the process's CPU time per scrape (user and
// system, the GC's included), steadier than ns/op on a shared machine.
// Compare with the end-to-end numbers in docs/performance.md to see
// what gRPC, HTTP and the process boundary add.
//
//	go test ./host/internal/expose -run '^$' -bench HostPipeline -count 6 | benchstat -
func BenchmarkHostPipeline(b *testing.B) {
	for _, plugins := range []int{1, 6} {
		wire := make([][][]byte, plugins)
		for i := range plugins {
			plan := workload.NewPlan(100000, i, plugins)
			for _, batch := range batchtest.Record(plan.Write) {
				buf, err := proto.Marshal(&pluginv1.CollectResponse{Batch: batch})
				if err != nil {
					b.Fatal(err)
				}
				wire[i] = append(wire[i], buf)
			}
		}
		for _, bc := range []struct {
			name   string
			format expfmt.Format
			gzip   bool
		}{
			{"text", expfmt.FmtText, false},
			{"text-gzip", expfmt.FmtText, true},
			{"openmetrics", expfmt.FmtOpenMetrics_1_0_0, false},
			{"protobuf", expfmt.FmtProtoDelim, false},
		} {
			b.Run("series=100000/plugins="+strconv.Itoa(plugins)+"/format="+bc.name, func(b *testing.B) {
				gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
				var n countWriter
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					inputs := make([]guard.Input, plugins)
					for i, msgs := range wire {
						inputs[i] = guard.Input{Plugin: "bench" + strconv.Itoa(i+1), MaxSeries: 1 << 30}
						for _, buf := range msgs {
							var msg pluginv1.CollectResponse
							if err := proto.Unmarshal(buf, &msg); err != nil {
								b.Fatal(err)
							}
							inputs[i].Batches = append(inputs[i].Batches, msg.Batch)
						}
					}
					fams := guard.Merge(inputs, guard.Options{MaxLabelValueLen: 4096}).Families
					n = 0
					var sink io.Writer = &n
					if bc.gzip {
						gz.Reset(&n)
						sink = gz
					}
					if err := Write(sink, bc.format, fams); err != nil {
						b.Fatal(err)
					}
					if bc.gzip {
						gz.Close()
					}
				}
				b.ReportMetric(float64(n), "bytes/op")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

package sdk

import (
	"strconv"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// BenchmarkWriterCollect is the plugin side of a 100k-series collect as
// Serve runs it: one Writer kept from collect to collect (restart, the
// encoder recycling sent batches), each batch marshalled as gRPC's Send
// does. The series are shaped like the performance harness's workload
// (internal/dev/bench/workload, which this package cannot import): 60%
// counters with 3 labels, 27% gauges with 2, 13% of the series in 10-bucket
// histograms with 2, over 10 families each; label values held by the
// plugin, so most are the same string as the sample before's. cpu-ms/op is
// the process's CPU time per collect (the GC's included).
//
//	go test ./sdk -run '^$' -bench WriterCollect -count 6 | benchstat -
func BenchmarkWriterCollect(b *testing.B) {
	const n = 100000
	type sample struct {
		d  *Desc
		lv []string
		v  float64
	}
	var samples []sample
	bounds := []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}
	cum := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hists, gauges := n/100, n*27/100
	counters := n - gauges - 13*hists
	for k, per := range []int{counters, gauges, hists} {
		for f := range 10 {
			var d *Desc
			switch k {
			case 0:
				d = NewDesc("bench_rx_"+strconv.Itoa(f)+"_bytes_total", Counter, "Synthetic counter.", "device", "port", "queue")
			case 1:
				d = NewDesc("bench_link_"+strconv.Itoa(f)+"_speed_bytes", Gauge, "Synthetic gauge.", "device", "port")
			default:
				d = NewDesc("bench_op_"+strconv.Itoa(f)+"_latency_seconds", Histogram, "Synthetic histogram.", "device", "op")
			}
			for j := range per / 10 {
				s := sample{d: d, v: float64(j)*1234567 + float64(f)}
				switch k {
				case 0:
					s.lv = []string{"mlx5_" + strconv.Itoa(j/64), strconv.Itoa(j/8%8 + 1), "q" + strconv.Itoa(j%8)}
				case 1:
					s.lv = []string{"mlx5_" + strconv.Itoa(j/16), strconv.Itoa(j%16 + 1)}
				default:
					s.lv = []string{"mlx5_" + strconv.Itoa(j/8), "op" + strconv.Itoa(j%8)}
				}
				samples = append(samples, s)
			}
		}
	}
	var out []byte
	send := func(msg *pluginv1.CollectResponse) error {
		var err error
		out, err = proto.MarshalOptions{}.MarshalAppend(out[:0], msg)
		return err
	}
	w := newWriter(nil, "", 0, true, send)
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		w.restart(send)
		for i := range samples {
			s := &samples[i]
			switch s.d.Type {
			case Histogram:
				w.Histogram(s.d, bounds, cum, 11, 16.5, s.lv...)
			case Gauge:
				w.Gauge(s.d, s.v, s.lv...)
			default:
				w.Counter(s.d, s.v, s.lv...)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
}

package push

import (
	"bytes"
	"math"
	"testing"

	"github.com/prometheus/prometheus/prompb"
)

// TestEncodingMatchesPrompb: the push's write request encodes byte for
// byte what Prometheus's own prompb.WriteRequest encodes.
func TestEncodingMatchesPrompb(t *testing.T) {
	sets := [][]prompb.Label{
		{{Name: "__name__", Value: "g"}},
		{{Name: "__name__", Value: "rdma_port_rcv_bytes_total"}, {Name: "device", Value: "mlx5_0"}, {Name: "port", Value: "1"}},
		{{Name: "__name__", Value: "x"}, {Name: "long", Value: string(bytes.Repeat([]byte("v"), 300))}, {Name: "utf8", Value: "größe ✓"}},
		{},
	}
	values := []float64{0, math.Copysign(0, -1), 1, -2.5, math.NaN(), staleNaN, math.Inf(1), math.Inf(-1), 1e300}
	for _, ts := range []int64{0, 1, 1796284841865, -5} {
		for _, v := range values {
			var want prompb.WriteRequest
			got := &writeRequest{ts: ts}
			for _, ls := range sets {
				want.Timeseries = append(want.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: v, Timestamp: ts}}})
				got.labels = append(got.labels, encodeLabels(ls))
				got.values = append(got.values, v)
			}
			w, err := want.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			g, err := got.marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(g, w) || got.Size() != want.Size() {
				t.Fatalf("ts %d value %v: encoded\n%x\nprompb\n%x", ts, v, g, w)
			}
			var back prompb.WriteRequest
			if err := back.Unmarshal(g); err != nil || len(back.Timeseries) != len(sets) {
				t.Fatalf("prompb cannot read it back: %v", err)
			}
		}
	}
	if n, err := (&writeRequest{}).marshal(); err != nil || len(n) != 0 {
		t.Errorf("empty request: %x %v", n, err)
	}
}

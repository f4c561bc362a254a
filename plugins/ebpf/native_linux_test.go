package main

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Real block I/O on a loop device: by default each disk latency histogram
// carries its schema 0 native form beside the classic buckets, and the
// native buckets hold exactly the requests the classic ones do; with
// native_histograms: false only the classic buckets are written.
func TestDiskNativeHistograms(t *testing.T) {
	requireRoot(t)
	name, path := loopDevice(t)
	for _, native := range []bool{true, false} {
		_, c := start(t, map[string]any{"tcp_retransmits": false, "native_histograms": native})
		const writes, reads = 11, 7
		directIO(t, path, writes, reads)
		res := sdktest.Collect(t, c, 0)
		if res.Status != nil {
			t.Fatalf("collect: %v", res.Status)
		}
		found := 0
		for _, mf := range res.Families(t) {
			op := map[string]string{"disk_read_latency_seconds": "read", "disk_write_latency_seconds": "write"}[mf.GetName()]
			if op == "" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() != name {
					continue
				}
				found++
				h := m.GetHistogram()
				if len(h.GetBucket()) != len(defaultBounds())+1 {
					t.Errorf("%s: %d classic buckets, want the %d bounds and +Inf", op, len(h.GetBucket()), len(defaultBounds()))
				}
				if !native {
					if h.Schema != nil || len(h.GetPositiveSpan()) != 0 {
						t.Errorf("%s: native histogram written with native_histograms: false: %v", op, h)
					}
					continue
				}
				if h.GetSchema() != 0 || h.GetZeroThreshold() != math.Ldexp(1, minDefaultExp) {
					t.Errorf("%s: schema %d zero threshold %v, want 0 and 2^%d", op, h.GetSchema(), h.GetZeroThreshold(), minDefaultExp)
				}
				// The native buckets add up to the count, and each native
				// bucket is the classic bucket with the same upper bound.
				total, count := h.GetZeroCount(), int64(0)
				idx := int32(0)
				for j, sp := range h.GetPositiveSpan() {
					if j == 0 {
						idx = sp.GetOffset()
					} else {
						idx += sp.GetOffset()
					}
					for range sp.GetLength() {
						count += h.GetPositiveDelta()[0]
						h.PositiveDelta = h.PositiveDelta[1:]
						total += uint64(count)
						if ub := math.Ldexp(1, int(idx)); idx <= maxDefaultExp {
							if got := classicBucket(h, ub) - classicBucket(h, ub/2); got != uint64(count) {
								t.Errorf("%s: native bucket %d holds %d, the classic (%v, %v] %d", op, idx, count, ub/2, ub, got)
							}
						}
						idx++
					}
				}
				if total != h.GetSampleCount() || h.GetSampleCount() == 0 {
					t.Errorf("%s: native buckets hold %d of %d requests", op, total, h.GetSampleCount())
				}
			}
		}
		if found != 2 {
			t.Errorf("native_histograms %v: %d latency histograms for %s, want read and write", native, found, name)
		}
	}
}

// classicBucket is the cumulative count of the classic bucket with upper
// bound ub (0 below the first).
func classicBucket(h *dto.Histogram, ub float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == ub {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

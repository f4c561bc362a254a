package wire

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// The Encoder remembers the last family's chunk and, per label position,
// label values with their string-table indexes within a batch. Written across
// many small batches (every third sample flushes), families interleaved,
// label values repeated, changed, moved between positions, of families
// with different label counts and past the positions it caches, every sample reads back as written, with
// a recycling encoder (whose sent batches' memory comes back) as with a
// recording one.
func TestEncoderLastValuesAcrossBatchesAndFamilies(t *testing.T) {
	a := &Header{Name: "a_total", Type: pluginv1.MetricType_METRIC_TYPE_COUNTER, Labels: []string{"x", "y", "z"}}
	b := &Header{Name: "b", Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Labels: []string{"x"}}
	wide := &Header{Name: "wide", Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Labels: strings.Split("l0 l1 l2 l3 l4 l5 l6 l7 l8 l9", " ")}
	type sample struct {
		h  *Header
		lv []string
		v  float64
	}
	var in []sample
	for i := range 50 {
		in = append(in, sample{a, []string{"d" + fmt.Sprint(i/4), "p" + fmt.Sprint(i%3), "q"}, float64(i)})
		if i%5 == 0 {
			in = append(in, sample{b, []string{"q"}, -float64(i)})
			in = append(in, sample{a, []string{"q", "d" + fmt.Sprint(i/4), "p" + fmt.Sprint(i%3)}, float64(i) + 0.5})
			var lv []string
			for j := range 10 { // more positions than the encoder caches
				lv = append(lv, fmt.Sprint("v", (i+j)%7))
			}
			in = append(in, sample{wide, lv, float64(i) + 0.25})
		}
	}
	for _, recycle := range []bool{false, true} {
		var got []string
		send := func(resp *pluginv1.CollectResponse) error {
			// Read (a copy of) the batch now: a recycling encoder reuses it.
			batch := proto.Clone(resp.GetBatch()).(*pluginv1.Batch)
			for _, c := range batch.GetFamilies() {
				ch, err := Open(batch, c)
				if err != nil {
					return err
				}
				for i := range ch.Len() {
					var lv []string
					for j := range ch.NumLabels() {
						lv = append(lv, ch.LabelValue(i, j))
					}
					got = append(got, fmt.Sprintf("%s{%s} %v", ch.Name(), strings.Join(lv, ","), ch.Value(i)))
				}
			}
			return nil
		}
		e := NewEncoder(3, recycle, send)
		var want []string
		for _, s := range in {
			e.AddValue(e.Open(s.h, nil, false), s.lv, s.v)
			want = append(want, fmt.Sprintf("%s{%s} %v", s.h.Name, strings.Join(s.lv, ","), s.v))
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		// A batch holds a chunk per family: compare the samples, not the order.
		slices.Sort(got)
		slices.Sort(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("recycle %v: read back\n%s\nwant\n%s", recycle, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

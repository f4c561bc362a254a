package wire

import (
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

type fakeStream struct {
	msgs []*pluginv1.CollectResponse
	end  error
}

func (f *fakeStream) Recv() (*pluginv1.CollectResponse, error) {
	if len(f.msgs) == 0 {
		return nil, f.end
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

func TestDrain(t *testing.T) {
	b1, b2 := &pluginv1.Batch{Strings: table("")}, &pluginv1.Batch{Strings: table("", "x")}
	e1, e2 := &pluginv1.CollectError{Collector: "a"}, &pluginv1.CollectError{Collector: "b"}
	msgs := []*pluginv1.CollectResponse{
		{Batch: b1},
		{Errors: []*pluginv1.CollectError{e1}},
		{Batch: b2, Errors: []*pluginv1.CollectError{e2}},
	}
	broken := errors.New("stream broke")
	for _, tc := range []struct {
		name    string
		end     error
		wantErr error
	}{
		{"eof", io.EOF, nil},
		{"broken stream keeps what arrived", broken, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches, errs, err := Drain(&fakeStream{msgs: append([]*pluginv1.CollectResponse(nil), msgs...), end: tc.end}, Limits{})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(batches) != 2 || batches[0] != b1 || batches[1] != b2 {
				t.Errorf("batches = %v, want [b1 b2]", batches)
			}
			if len(errs) != 2 || errs[0] != e1 || errs[1] != e2 {
				t.Errorf("errors = %v, want [e1 e2]", errs)
			}
		})
	}
	if b, e, err := Drain(&fakeStream{end: io.EOF}, Limits{}); len(b)+len(e) != 0 || err != nil {
		t.Errorf("empty stream: %v %v %v", b, e, err)
	}
}

// flood is a stream that never ends: every Recv is a batch of gauges with
// one label value of valueLen bytes each, unique per series.
type flood struct {
	perBatch, valueLen int
	recvs              int
}

func (f *flood) Recv() (*pluginv1.CollectResponse, error) {
	f.recvs++
	b := &pluginv1.Batch{Strings: table("", "flood", "i")}
	c := &pluginv1.FamilyChunk{Name: 1, Type: gauge, LabelNames: []uint32{2}}
	for i := range f.perBatch {
		c.LabelValues = append(c.LabelValues, uint32(len(b.Strings)))
		b.Strings = append(b.Strings, []byte(fmt.Sprintf("%0*d-%d", f.valueLen, f.recvs, i)))
		c.Values = append(c.Values, float64(i))
	}
	b.Families = []*pluginv1.FamilyChunk{c}
	return &pluginv1.CollectResponse{Batch: b, Errors: []*pluginv1.CollectError{{Collector: "c", Message: fmt.Sprint(f.recvs)}}}, nil
}

func TestDrainStopsAtTheLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stream    *flood
		lim       Limits
		wantRecvs int
	}{
		// 1000 series per batch, cap 2500: the third batch crosses it.
		{"series cap", &flood{perBatch: 1000, valueLen: 1}, Limits{MaxSeries: 2500}, 3},
		{"series cap reached exactly goes on", &flood{perBatch: 1000, valueLen: 1}, Limits{MaxSeries: 3000}, 4},
		// Few series with 10 KiB label values each: the byte budget stops it.
		{"byte budget", &flood{perBatch: 10, valueLen: 10 << 10}, Limits{MaxSeries: 1 << 30, MaxBytes: 1 << 20}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches, errs, err := Drain(tc.stream, tc.lim)
			if err != nil {
				t.Fatalf("Drain: %v; stopping at a limit is not an error", err)
			}
			if tc.stream.recvs != tc.wantRecvs || len(batches) != tc.wantRecvs {
				t.Fatalf("received %d messages and kept %d batches, want %d: Drain must stop at the batch that crosses the limit, and keep it", tc.stream.recvs, len(batches), tc.wantRecvs)
			}
			series, bytes := 0, 0
			for _, b := range batches {
				series, bytes = series+Series(b), bytes+Size(b)
			}
			if !tc.lim.Exceeded(series, bytes) || tc.lim.Exceeded(series-Series(batches[len(batches)-1]), bytes-Size(batches[len(batches)-1])) {
				t.Errorf("kept %d series, %d bytes: not exactly up to the crossing batch of %+v", series, bytes, tc.lim)
			}
			if len(errs) != len(batches) {
				t.Errorf("%d partial errors kept, want one per message", len(errs))
			}
		})
	}
}

func TestDrainBoundsPartialErrors(t *testing.T) {
	s := &fakeStream{end: io.EOF}
	for i := range 30 {
		s.msgs = append(s.msgs, &pluginv1.CollectResponse{Errors: []*pluginv1.CollectError{{Collector: fmt.Sprint(i)}, {Collector: "again"}}})
	}
	_, errs, err := Drain(s, Limits{MaxErrors: 25})
	if err != nil || len(errs) != 25 || errs[24].GetCollector() != "12" {
		t.Fatalf("kept %d errors (err %v), want the first 25", len(errs), err)
	}
}

func TestLimitsFor(t *testing.T) {
	if lim := LimitsFor(0); lim.MaxSeries != 0 || lim.MaxBytes != 0 || lim.MaxErrors == 0 {
		t.Errorf("LimitsFor(0) = %+v, want no series or byte limit", lim)
	}
	if lim := LimitsFor(20); lim.MaxSeries != 20 || lim.MaxBytes != MinBytes {
		t.Errorf("LimitsFor(20) = %+v, want the byte floor", lim)
	}
	if lim := LimitsFor(100000); lim.MaxBytes != 100000*BytesPerSeries {
		t.Errorf("LimitsFor(100000) = %+v", lim)
	}
	if lim := LimitsFor(math.MaxInt); lim.MaxBytes <= 0 {
		t.Errorf("LimitsFor(MaxInt) = %+v: the byte budget overflowed", lim)
	}
}

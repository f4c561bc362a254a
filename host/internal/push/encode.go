package push

import (
	"errors"
	"math"

	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"
)

// encodeLabels is the labels part of a remote write 1.0 TimeSeries
// (prompb.TimeSeries field 1, repeated Label{name = 1, value = 2}), made
// once per label set and kept in the table: what a push encodes again and
// again is then only each sample's value and timestamp.
func encodeLabels(ls []prompb.Label) []byte {
	var b []byte
	for _, l := range ls {
		n := 0
		if l.Name != "" {
			n += 1 + protowire.SizeBytes(len(l.Name))
		}
		if l.Value != "" {
			n += 1 + protowire.SizeBytes(len(l.Value))
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		if l.Name != "" {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, l.Name)
		}
		if l.Value != "" {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendString(b, l.Value)
		}
	}
	return b
}

// writeRequest is a remote write 1.0 prompb.WriteRequest of one sample
// per series, at one timestamp, whose label sets are encoded already. It
// has the Size and MarshalToSizedBuffer methods of Prometheus's gogo
// generated types, which client_golang's remote write client uses, and
// encodes byte for byte what prompb.WriteRequest.Marshal encodes for the
// same request (TestEncodingMatchesPrompb).
type writeRequest struct {
	labels [][]byte // per series, from encodeLabels
	values []float64
	ts     int64
	// Per series (by index) whose sample is a native histogram: its
	// prompb.Histogram, encoded (TimeSeries field 4, histograms), sent
	// instead of the float sample.
	hists map[int][]byte
}

// sampleSize is the size of Sample{value, timestamp}: proto3 leaves out
// zero fields (a value of -0 too, as prompb does).
func (r *writeRequest) sampleSize(v float64) int {
	n := 0
	if v != 0 {
		n += 1 + 8
	}
	if r.ts != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.ts))
	}
	return n
}

func (r *writeRequest) seriesSize(i int) int {
	if h, ok := r.hists[i]; ok {
		return len(r.labels[i]) + 1 + protowire.SizeBytes(len(h))
	}
	s := r.sampleSize(r.values[i])
	return len(r.labels[i]) + 1 + protowire.SizeBytes(s)
}

// Size is the encoded size.
func (r *writeRequest) Size() int {
	n := 0
	for i := range r.labels {
		n += 1 + protowire.SizeBytes(r.seriesSize(i))
	}
	return n
}

// MarshalToSizedBuffer encodes r into buf, whose length is r.Size().
func (r *writeRequest) MarshalToSizedBuffer(buf []byte) (int, error) {
	b := buf[:0]
	for i, ls := range r.labels {
		v := r.values[i]
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.seriesSize(i)))
		b = append(b, ls...)
		if h, ok := r.hists[i]; ok {
			b = protowire.AppendTag(b, 4, protowire.BytesType)
			b = protowire.AppendBytes(b, h)
			continue
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.sampleSize(v)))
		if v != 0 {
			b = protowire.AppendTag(b, 1, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, math.Float64bits(v))
		}
		if r.ts != 0 {
			b = protowire.AppendTag(b, 2, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(r.ts))
		}
	}
	if len(b) != len(buf) || (len(b) > 0 && &b[0] != &buf[0]) {
		return 0, errors.New("push: write request size changed while encoding")
	}
	return len(b), nil
}

// marshal encodes r.
func (r *writeRequest) marshal() ([]byte, error) {
	buf := make([]byte, r.Size())
	_, err := r.MarshalToSizedBuffer(buf)
	return buf, err
}

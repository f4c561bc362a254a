package push

import (
	"encoding/binary"
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
// zero fields (a value of -0 too, as prompb does). It is below 128 (at
// most 9 + 11 bytes), so its length prefix is one byte.
func (r *writeRequest) sampleSize(v float64) int {
	n := r.tsSize()
	if v != 0 {
		n += 1 + 8
	}
	return n
}

// tsSize is the size of the samples' timestamp field (0: left out).
func (r *writeRequest) tsSize() int {
	if r.ts == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(uint64(r.ts))
}

func (r *writeRequest) seriesSize(i int) int {
	if r.hists != nil {
		if h, ok := r.hists[i]; ok {
			return len(r.labels[i]) + 1 + protowire.SizeBytes(len(h))
		}
	}
	return len(r.labels[i]) + 2 + r.sampleSize(r.values[i])
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
// The timestamp field, the same in every sample, is encoded once; the
// tags are their one-byte encodings (field 1 or 2, wire type bytes or
// fixed64, all below 16).
func (r *writeRequest) MarshalToSizedBuffer(buf []byte) (int, error) {
	const (
		tagSeries    = 1<<3 | byte(protowire.BytesType)   // WriteRequest.timeseries
		tagSample    = 2<<3 | byte(protowire.BytesType)   // TimeSeries.samples
		tagHistogram = 4<<3 | byte(protowire.BytesType)   // TimeSeries.histograms
		tagValue     = 1<<3 | byte(protowire.Fixed64Type) // Sample.value
	)
	var tsBuf [11]byte
	tsField := tsBuf[:0]
	if r.ts != 0 {
		tsField = protowire.AppendVarint(protowire.AppendTag(tsField, 2, protowire.VarintType), uint64(r.ts))
	}
	b := buf[:0]
	for i, ls := range r.labels {
		if r.hists != nil {
			if h, ok := r.hists[i]; ok {
				b = append(b, tagSeries)
				b = protowire.AppendVarint(b, uint64(len(ls)+1+protowire.SizeBytes(len(h))))
				b = append(b, ls...)
				b = append(b, tagHistogram)
				b = protowire.AppendBytes(b, h)
				continue
			}
		}
		v := r.values[i]
		ss := len(tsField)
		if v != 0 {
			ss += 1 + 8
		}
		b = append(b, tagSeries)
		b = protowire.AppendVarint(b, uint64(len(ls)+2+ss))
		b = append(b, ls...)
		b = append(b, tagSample, byte(ss))
		if v != 0 {
			b = append(b, tagValue)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		b = append(b, tsField...)
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
